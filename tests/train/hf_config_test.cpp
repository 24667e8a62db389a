// config.json against the deck's model (train/hf_init): published config.json files of GPT-2 124M,
// TinyLlama 1.1B, Llama 3.2 1B and Mixtral 8x7B (their top-level fields as the Hugging Face Hub
// holds them, written out here) match the models of their shape, and each difference is named.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "family/model_config.hpp"
#include "train/hf_init.hpp"

namespace trident {
namespace {

using Config = std::map<std::string, std::string>;

const Config kGpt2 = {{"model_type", "gpt2"},          {"n_layer", "12"},        {"n_embd", "768"},
                      {"n_head", "12"},                {"vocab_size", "50257"},  {"n_positions", "1024"},
                      {"activation_function", "gelu_new"}, {"layer_norm_epsilon", "1e-05"}, {"n_inner", "null"}};

const Config kTinyLlama = {{"model_type", "llama"},     {"num_hidden_layers", "22"}, {"hidden_size", "2048"},
                           {"num_attention_heads", "32"}, {"num_key_value_heads", "4"}, {"intermediate_size", "5632"},
                           {"vocab_size", "32000"},     {"rope_theta", "10000.0"},  {"rms_norm_eps", "1e-05"},
                           {"tie_word_embeddings", "false"}, {"hidden_act", "silu"}, {"rope_scaling", "null"},
                           {"attention_bias", "false"}, {"max_position_embeddings", "2048"}};

ModelConfig gpt2_124m() {
  ModelConfig model;
  model.layers = 12;
  model.d_model = 768;
  model.heads = 12;
  model.seq_len = 1024;
  model.vocab = 50257;
  return model;
}

ModelConfig tinyllama() {
  ModelConfig model;
  model.family = ModelFamily::llama;
  model.layers = 22;
  model.d_model = 2048;
  model.heads = 32;
  model.kv_heads = 4;
  model.ffn_hidden = 5632;
  model.seq_len = 2048;
  model.vocab = 32000;
  model.rope_theta = 10000.0;
  model.norm_eps = 1e-5;
  model.tie_embeddings = false;
  return model;
}

TEST(HfConfigFields, PublishedGpt2MatchesItsShapeWithAShorterSequence) {
  ModelConfig model = gpt2_124m();
  EXPECT_TRUE(hf_config_mismatches(kGpt2, model).empty());
  model.seq_len = 256;  // the first rows of the position table are read
  EXPECT_TRUE(hf_config_mismatches(kGpt2, model).empty());
  model.seq_len = 2048;
  const auto lines = hf_config_mismatches(kGpt2, model);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "n_positions: config.json 1024, deck model.seq_len needs at least 2048");
}

TEST(HfConfigFields, PublishedTinyLlamaMatchesAndEachDifferenceIsNamed) {
  ModelConfig model = tinyllama();
  EXPECT_TRUE(hf_config_mismatches(kTinyLlama, model).empty());
  model.kv_heads = 8;
  model.norm_eps = 1e-6;
  model.tie_embeddings = true;
  const auto lines = hf_config_mismatches(kTinyLlama, model);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "num_key_value_heads: config.json 4, deck model.kv_heads 8");
  EXPECT_EQ(lines[1], "rms_norm_eps: config.json 1e-05, deck model.norm_eps 1e-06");
  EXPECT_EQ(lines[2], "tie_word_embeddings: config.json false, deck model.tie_embeddings true");
}

TEST(HfConfigFields, AbsentFieldsReadAsHuggingFacesDefaults) {
  Config config = kTinyLlama;
  config.erase("num_key_value_heads");  // LlamaConfig: as many as the query heads
  config.erase("rope_theta");           // LlamaConfig: 10000
  ModelConfig model = tinyllama();
  model.kv_heads = 32;
  EXPECT_TRUE(hf_config_mismatches(config, model).empty());
  config.erase("vocab_size");  // required: no default to compare with
  const auto lines = hf_config_mismatches(config, model);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "vocab_size: config.json (absent), deck model.vocab 32000");
}

TEST(HfConfigFields, Llama32RopeScalingAndAnotherArchitectureAreRefused) {
  Config llama32 = kTinyLlama;
  llama32["rope_scaling"] = R"({"factor":32.0,"rope_type":"llama3"})";
  const auto lines = hf_config_mismatches(llama32, tinyllama());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("rope_scaling: config.json {\"factor\""), std::string::npos) << lines[0];
  const auto other = hf_config_mismatches(kGpt2, tinyllama());
  ASSERT_EQ(other.size(), 1u);  // model_type alone: the other fields belong to another architecture
  EXPECT_EQ(other[0], "model_type: config.json gpt2, deck model.family and [model.moe] llama");
}

TEST(HfConfigFields, PublishedMixtralMatchesAMixtureInEveryLayer) {
  const Config mixtral = {{"model_type", "mixtral"}, {"num_hidden_layers", "32"}, {"hidden_size", "4096"},
                          {"num_attention_heads", "32"}, {"num_key_value_heads", "8"}, {"intermediate_size", "14336"},
                          {"vocab_size", "32000"}, {"rope_theta", "1000000.0"}, {"rms_norm_eps", "1e-05"},
                          {"num_local_experts", "8"}, {"num_experts_per_tok", "2"}, {"sliding_window", "null"},
                          {"tie_word_embeddings", "false"}, {"hidden_act", "silu"}};
  ModelConfig model = tinyllama();
  model.layers = 32;
  model.d_model = 4096;
  model.kv_heads = 8;
  model.ffn_hidden = 14336;
  model.rope_theta = 1e6;
  model.moe.experts = 8;
  EXPECT_TRUE(hf_config_mismatches(mixtral, model).empty());
  model.moe.layer_freq = 2;
  const auto lines = hf_config_mismatches(mixtral, model);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("model.moe.layer_freq 2"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace trident
