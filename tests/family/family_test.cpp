// The family descriptions against published facts written out here: Hugging Face's tensor names
// and shapes, the parameter counts of GPT-2 124M and Llama 3 8B, and HF's initialisation rules.
#include "family/family.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace trident {
namespace {

ModelConfig gpt2_124m() {
  ModelConfig model;
  model.layers = 12, model.d_model = 768, model.heads = 12, model.seq_len = 1024, model.vocab = 50257;
  return model;
}

ModelConfig llama3_8b() {
  ModelConfig model;
  model.family = ModelFamily::llama;
  model.layers = 32, model.d_model = 4096, model.heads = 32, model.kv_heads = 8, model.ffn_hidden = 14336;
  model.seq_len = 8192, model.vocab = 128256, model.tie_embeddings = false;
  return model;
}

std::int64_t layer_elements(const ModelConfig& model, int tp = 1) {
  std::int64_t elements = 0;
  for (const TensorSpec& tensor : layer_tensors(model, 0)) elements += tensor.elements_per_rank(tp);
  return elements;
}

TEST(Family, EveryDeckWordHasOneDescription) {
  std::set<ModelFamily> described;
  for (const FamilyDescription& family : families()) EXPECT_TRUE(described.insert(family.family).second);
  for (const auto& choice : choices(ModelFamily{})) {
    EXPECT_TRUE(described.count(choice.value)) << choice.word;
    EXPECT_EQ(family_description(choice.value).family, choice.value);
  }
}

// GPT-2 124M: 124,439,808 parameters, of which wte 50257 × 768 and wpe 1024 × 768 (HF's gpt2).
TEST(Family, Gpt2CountsMatchTheReleasedModel) {
  const ModelConfig model = gpt2_124m();
  const std::int64_t embeddings = 50257LL * 768 + 1024LL * 768;
  EXPECT_EQ(model.layers * layer_elements(model) + 2 * 768 + embeddings, 124439808);
  std::int64_t inputs = 0;
  for (const TensorSpec& tensor : input_tensors(model)) inputs += tensor.elements();
  EXPECT_EQ(inputs, embeddings);
  EXPECT_EQ(norm_floats(model), 2 * 768);
  EXPECT_EQ(layer_tensors(model, 3).front().name, "h.3.ln_1.weight");
  EXPECT_EQ(layer_tensors(model, 3).back().name, "h.3.mlp.c_proj.bias");
  const std::vector<TensorSpec> tensors = layer_tensors(model, 0);
  const auto c_attn = std::find_if(tensors.begin(), tensors.end(),
                                   [](const TensorSpec& t) { return t.name == "h.0.attn.c_attn.weight"; });
  ASSERT_NE(c_attn, tensors.end());
  EXPECT_EQ(c_attn->shape, (std::vector<std::int64_t>{768, 2304}));  // Conv1D: [in, out]
}

// Llama 3 8B: 8,030,261,248 parameters with its untied head (Meta's model card).
TEST(Family, LlamaCountsMatchTheReleasedModel) {
  const ModelConfig model = llama3_8b();
  const std::int64_t embedding = 128256LL * 4096;
  EXPECT_EQ(model.layers * layer_elements(model) + norm_floats(model) + 2 * embedding, 8030261248);
  EXPECT_EQ(input_tensors(model).size(), 1u);  // no position table: rotary
  EXPECT_TRUE(family_of(model).rotary());
  EXPECT_EQ(final_norm_tensors(model).size(), 1u);  // RMSNorm: no bias
  EXPECT_EQ(layer_tensors(model, 31).front().name, "layers.31.input_layernorm.weight");
}

TEST(Family, TensorParallelSharesAddUpToTheWholeLayer) {
  for (const ModelConfig& model : {gpt2_124m(), llama3_8b()}) {
    for (int tp : {2, 4}) {
      std::int64_t whole = 0, replicated = 0;
      for (const TensorSpec& tensor : layer_tensors(model, 0)) {
        whole += tensor.elements();
        if (tensor.shard_dim < 0) replicated += tensor.elements();
      }
      EXPECT_EQ(tp * layer_elements(model, tp) - (tp - 1) * replicated, whole)
          << family_of(model).title << " tp " << tp;
    }
  }
}

// Hugging Face's _init_weights: biases 0, norm weights 1, every other weight normal; GPT-2 scales
// its residual projections (c_proj) by 1/√(2·layers).
TEST(Family, InitialisationFollowsHuggingFace) {
  for (const ModelConfig& model : {gpt2_124m(), llama3_8b()}) {
    std::vector<TensorSpec> all = input_tensors(model);
    for (const TensorSpec& tensor : layer_tensors(model, 0)) all.push_back(tensor);
    for (const TensorSpec& tensor : final_norm_tensors(model)) all.push_back(tensor);
    for (const TensorSpec& tensor : all) {
      const std::string& name = tensor.name;
      const bool bias = name.ends_with(".bias");
      const bool norm = !bias && (name.find("ln_") != std::string::npos || name.find("norm") != std::string::npos);
      const bool projection = model.family == ModelFamily::gpt2 && name.ends_with("c_proj.weight");
      const TensorInit expected = bias   ? TensorInit::zeros
                                  : norm ? TensorInit::ones
                                         : (projection ? TensorInit::residual_normal : TensorInit::normal);
      EXPECT_EQ(tensor.init, expected) << name;
    }
  }
}

TEST(Family, KeysAndDefaultsAreTheFamilys) {
  const FamilyDescription& gpt2 = family_description(ModelFamily::gpt2);
  const FamilyDescription& llama = family_description(ModelFamily::llama);
  EXPECT_FALSE(gpt2.reads_key("kv_heads"));
  for (const char* key : {"kv_heads", "ffn_hidden", "rope_theta", "norm_eps", "moe"}) EXPECT_TRUE(llama.reads_key(key));
  EXPECT_FALSE(gpt2.reads_key("moe"));
  EXPECT_EQ(gpt2.default_mlp_hidden(768), 3072);
  EXPECT_EQ(llama.default_mlp_hidden(4096), 11008);  // Llama 2 7B's, from Meta's rule
  EXPECT_TRUE(gpt2.head_tied_by_default && !gpt2.head_may_untie);
  EXPECT_TRUE(!llama.head_tied_by_default && llama.head_may_untie);
  EXPECT_TRUE(is_token_embedding("wte.weight") && is_token_embedding("embed_tokens.weight"));
  EXPECT_FALSE(is_token_embedding(kUntiedHead));
}

// [model.moe] with layer_freq 2: layer 2 a mixture, named and ordered as Mixtral's checkpoints
// (Hugging Face's MixtralSparseMoeBlock: the router, then per expert w1, w3, w2, the order the
// parameter buffer keeps, so that w1 | w3 is one product's weight), layer 3 Llama's dense MLP.
TEST(Family, MixtureLayersListMixtralsTensors) {
  ModelConfig model = llama3_8b();
  model.moe = {.experts = 3, .top_k = 2, .expert_ffn_hidden = 1024, .layer_freq = 2};
  std::vector<std::string> names;
  for (const TensorSpec& tensor : layer_tensors(model, 2)) names.push_back(tensor.name);
  const std::vector<std::string> attention = {
      "input_layernorm.weight",  "self_attn.q_proj.weight", "self_attn.k_proj.weight",
      "self_attn.v_proj.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight"};
  std::vector<std::string> expected;
  for (const std::string& name : attention) expected.push_back("layers.2." + name);
  expected.push_back("layers.2.block_sparse_moe.gate.weight");
  for (int e = 0; e < 3; ++e)
    for (const char* w : {"w1", "w3", "w2"})
      expected.push_back("layers.2.block_sparse_moe.experts." + std::to_string(e) + "." + w + ".weight");
  EXPECT_EQ(names, expected);

  const std::vector<TensorSpec> mixture = layer_tensors(model, 2);
  EXPECT_EQ(mixture[6].shape, (std::vector<std::int64_t>{3, 4096}));     // router [E, C]
  EXPECT_EQ(mixture[7].shape, (std::vector<std::int64_t>{1024, 4096}));  // w1 [F, C]
  EXPECT_EQ(mixture[9].shape, (std::vector<std::int64_t>{4096, 1024}));  // w2 [C, F]
  for (std::size_t i = 6; i < mixture.size(); ++i) EXPECT_LT(mixture[i].shard_dim, 0) << mixture[i].name;  // replicated

  names.clear();
  for (const TensorSpec& tensor : layer_tensors(model, 3)) names.push_back(tensor.name);
  expected.clear();
  for (const std::string& name : attention) expected.push_back("layers.3." + name);
  for (const char* name : {"mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"})
    expected.push_back(std::string("layers.3.") + name);
  EXPECT_EQ(names, expected);
}

}  // namespace
}  // namespace trident
