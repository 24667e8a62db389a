// The ready decks in input_decks/ all validate and describe what their comments promise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "deck/deck.hpp"
#include "plan/model_size.hpp"

namespace trident {
namespace {

std::string deck_path(const std::string& name) { return std::string(TRIDENT_INPUT_DECKS_DIR) + "/" + name; }

// An empty llm.c shard, standing in for the shards a deck expects the user to prepare first
// (fortunes-llama.toml's, made by trident-data).
std::string empty_shard() {
  const auto path = std::filesystem::path(::testing::TempDir()) / "trident_input_decks_empty_shard.bin";
  std::vector<std::int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 1;
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size() * 4));
  return path.string();
}

// Loads the deck, standing in for what the user prepares first (shards, a published model's folder)
// one refusal at a time: the rest of the deck must hold once they are there.
void expect_valid_once_prepared(const std::string& path) {
  const std::string shard = empty_shard();
  std::map<std::string, std::vector<std::string>> stand_ins = {
      {"matches no file", {"data.path=" + shard, "eval.path=" + shard}},
      {"checkpoint.init: no such folder", {"checkpoint.init="}}};
  std::vector<std::string> overrides;
  while (true) {
    try {
      load_deck(path, overrides);
      return;
    } catch (const InputError& error) {
      const auto stand_in = std::ranges::find_if(
          stand_ins, [&](const auto& entry) { return std::string(error.what()).find(entry.first) != std::string::npos; });
      if (stand_in == stand_ins.end()) {
        ADD_FAILURE() << error.what();
        return;
      }
      overrides.insert(overrides.end(), stand_in->second.begin(), stand_in->second.end());
      stand_ins.erase(stand_in);
    }
  }
}

TEST(InputDecks, EveryDeckValidates) {
  std::set<std::string> validated;
  for (const auto& entry : std::filesystem::directory_iterator(TRIDENT_INPUT_DECKS_DIR)) {
    if (entry.path().extension() != ".toml") continue;
    validated.insert(entry.path().filename().string());
    expect_valid_once_prepared(entry.path().string());
  }
  // The directory walk found the decks (the ones below at least), so that an empty walk cannot pass.
  for (const char* deck :
       {"tiny.toml", "llama3-70b.toml", "moe-tiny.toml", "mixtral-8x7b.toml", "mixtral-8x22b.toml", "finetune-llama.toml"})
    EXPECT_TRUE(validated.count(deck)) << deck;
}

TEST(InputDecks, TinyIsTheCiDeck) {
  const Deck deck = load_deck(deck_path("tiny.toml"), {});
  EXPECT_EQ(deck.model.layers, 2);
  EXPECT_EQ(deck.model.d_model, 64);
  EXPECT_EQ(deck.model.heads, 4);
  EXPECT_EQ(deck.model.seq_len, 64);
  EXPECT_EQ(deck.model.vocab, 256);
  EXPECT_EQ(deck.data.kind, DataKind::synthetic);
  EXPECT_EQ(deck.train.steps, 200);
  EXPECT_EQ(deck.schedule.microbatches, 4);
  EXPECT_EQ(deck.schedule.micro_batch_size, 4);
  EXPECT_DOUBLE_EQ(deck.train.lr, 3e-3);
  EXPECT_DOUBLE_EQ(deck.train.min_lr, 3e-4);
  EXPECT_EQ(deck.train.warmup_steps, 10);
  EXPECT_EQ(deck.train.decay, LrDecay::cosine);
  EXPECT_DOUBLE_EQ(deck.train.grad_clip, 1.0);
  EXPECT_DOUBLE_EQ(deck.train.weight_decay, 0.1);
  EXPECT_EQ(deck.output.dir, "runs/tiny");
  EXPECT_EQ(deck.output.log_every, 10);
  // A real 3D grid: tp 2 x pp 2 (one layer per stage) x dp 2.
  EXPECT_EQ(deck.parallel.tp, 2);
  EXPECT_EQ(deck.parallel.pp, 2);
  EXPECT_EQ(deck.parallel.dp, 2);
  EXPECT_EQ(deck.schedule.kind, ScheduleKind::one_f_one_b);
}

TEST(InputDecks, SmallIsTheBenchmarkShape) {
  const Deck deck = load_deck(deck_path("small.toml"), {});
  EXPECT_EQ(deck.model.layers, 6);
  EXPECT_EQ(deck.model.d_model, 384);
  EXPECT_EQ(deck.model.heads, 6);
  EXPECT_EQ(deck.model.vocab, 4096);
  EXPECT_EQ(deck.model.seq_len, 256);
  EXPECT_EQ(deck.schedule.micro_batch_size, 8);
  EXPECT_EQ(deck.schedule.microbatches, 1);
  EXPECT_EQ(deck.train.steps, 20);
  EXPECT_EQ(deck.output.dir, "runs/small");
}

TEST(InputDecks, Gpt2IsThe124MShape) {
  const Deck deck = load_deck(deck_path("gpt2-124m.toml"), {});
  EXPECT_EQ(deck.model.layers, 12);
  EXPECT_EQ(deck.model.d_model, 768);
  EXPECT_EQ(deck.model.heads, 12);
  EXPECT_EQ(deck.model.seq_len, 1024);
  EXPECT_EQ(deck.model.vocab, 50257);
  EXPECT_EQ(deck.data.kind, DataKind::synthetic);
  EXPECT_EQ(deck.output.dir, "runs/gpt2-124m");
}

TEST(InputDecks, Gpt3IsThe175BFrontierGrid) {
  const Deck deck = load_deck(deck_path("gpt3-175b.toml"), {});
  EXPECT_EQ(deck.model.layers, 96);
  EXPECT_EQ(deck.model.d_model, 12288);
  EXPECT_EQ(deck.model.heads, 96);
  EXPECT_EQ(deck.model.seq_len, 2048);
  EXPECT_EQ(deck.model.vocab, 50257);
  EXPECT_EQ(deck.parallel.tp, 8);
  EXPECT_EQ(deck.parallel.pp, 16);
  EXPECT_EQ(deck.parallel.dp, 8);
  EXPECT_EQ(deck.parallel.world_size(), 1024);
  EXPECT_EQ(deck.schedule.micro_batch_size, 1);
  EXPECT_EQ(deck.schedule.microbatches, 64);
}

TEST(InputDecks, TinyAcceptsTheOverridesTheReadmeUses) {
  const Deck deck = load_deck(deck_path("tiny.toml"), {"schedule.kind=gpipe", "train.steps=20"});
  EXPECT_EQ(deck.schedule.kind, ScheduleKind::gpipe);
  EXPECT_EQ(deck.train.steps, 20);
  EXPECT_NE(deck.text.find("# --set schedule.kind=gpipe\n"), std::string::npos);
}

// The plan-only Llama 3 decks carry the published shapes (Llama 3 paper, table 3).
TEST(InputDecks, LlamaThreeDecksHaveThePublishedShapes) {
  struct Shape {
    const char* file;
    int layers, d_model, heads, ffn_hidden;
  };
  for (const Shape& shape :
       {Shape{"llama3-8b.toml", 32, 4096, 32, 14336}, Shape{"llama3-70b.toml", 80, 8192, 64, 28672},
        Shape{"llama3-405b.toml", 126, 16384, 128, 53248}}) {
    const ModelConfig model = load_deck(deck_path(shape.file), {}).model;
    EXPECT_EQ(model.family, ModelFamily::llama) << shape.file;
    EXPECT_EQ(model.layers, shape.layers) << shape.file;
    EXPECT_EQ(model.d_model, shape.d_model) << shape.file;
    EXPECT_EQ(model.heads, shape.heads) << shape.file;
    EXPECT_EQ(model.key_value_heads(), 8) << shape.file;
    EXPECT_EQ(model.mlp_hidden(), shape.ffn_hidden) << shape.file;
    EXPECT_EQ(model.vocab, 128256) << shape.file;
    EXPECT_EQ(model.seq_len, 8192) << shape.file;
    EXPECT_FALSE(model.tie_embeddings) << shape.file;
  }
}

// The plan-only Mixtral decks carry the published shapes (Mistral's config.json files): the counts
// are the released checkpoints', 8x7B's the Mixtral paper's "47B" total and "13B" active (two of
// eight experts per token).
TEST(InputDecks, MixtralDecksHaveThePublishedShapes) {
  const ModelConfig small = load_deck(deck_path("mixtral-8x7b.toml"), {}).model;
  EXPECT_EQ(total_params(small), 46'702'792'704);
  EXPECT_EQ(active_params(small), 12'879'925'248);
  const ModelConfig large = load_deck(deck_path("mixtral-8x22b.toml"), {}).model;
  EXPECT_EQ(total_params(large), 140'630'071'296);
  for (const ModelConfig& model : {small, large}) {
    EXPECT_EQ(model.family, ModelFamily::llama);
    EXPECT_EQ(model.key_value_heads(), 8);
    EXPECT_EQ(model.moe.experts, 8);
    EXPECT_EQ(model.moe.top_k, 2);
    EXPECT_EQ(model.moe_layers(), model.layers);  // every layer a mixture
    EXPECT_DOUBLE_EQ(model.rope_theta, 1e6);
    EXPECT_FALSE(model.tie_embeddings);
  }
  EXPECT_DOUBLE_EQ(small.moe.aux_loss_coef, 0.02);
}

}  // namespace
}  // namespace trident
