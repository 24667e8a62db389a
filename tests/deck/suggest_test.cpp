// Did-you-mean: edit distance and the choice of suggestion.
#include <gtest/gtest.h>

#include "deck/schema.hpp"
#include "deck/suggest.hpp"

namespace trident {
namespace {

TEST(EditDistance, CountsEachSlipOnce) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("layers", "layers"), 0u);
  EXPECT_EQ(edit_distance("layer", "layers"), 1u);     // insertion
  EXPECT_EQ(edit_distance("layerss", "layers"), 1u);   // deletion
  EXPECT_EQ(edit_distance("lbyers", "layers"), 1u);    // substitution
  EXPECT_EQ(edit_distance("d_modle", "d_model"), 1u);  // swap of neighbours
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
}

TEST(ClosestWord, SuggestsOnlyPlausibleTypos) {
  const std::vector<std::string> kinds{"gpipe", "1f1b", "interleaved-1f1b", "zb-h1"};
  EXPECT_EQ(closest_word("gpipes", kinds), "gpipe");
  EXPECT_EQ(closest_word("1F1B", kinds), "1f1b");
  EXPECT_EQ(closest_word("interleaved-1f1", kinds), "interleaved-1f1b");
  EXPECT_EQ(closest_word("pipedream", kinds), std::nullopt);
}

TEST(ClosestKey, PrefersTheSameNameInAnotherSection) {
  const std::vector<std::string> keys = key_names();
  EXPECT_EQ(closest_key("model", "lr", keys), "train.lr");
  EXPECT_EQ(closest_key("train", "layers", keys), "model.layers");
  EXPECT_EQ(closest_key("", "steps", keys), "train.steps");
}

TEST(ClosestKey, FixesTyposInTheNameOrTheSection) {
  const std::vector<std::string> keys = key_names();
  EXPECT_EQ(closest_key("model", "layer", keys), "model.layers");
  EXPECT_EQ(closest_key("model", "dmodel", keys), "model.d_model");
  EXPECT_EQ(closest_key("schedule", "micro_batches", keys), "schedule.microbatches");
  EXPECT_EQ(closest_key("trian", "lr", keys), "train.lr");
  EXPECT_EQ(closest_key("model", "learning_rate_schedule", keys), std::nullopt);
}

// A dotted section ([model.moe]) is everything before the key's last dot.
TEST(ClosestKey, FindsKeysOfNestedSections) {
  const std::vector<std::string> keys = key_names();
  EXPECT_EQ(closest_key("model.moe", "expert", keys), "model.moe.experts");
  EXPECT_EQ(closest_key("model", "experts", keys), "model.moe.experts");
  EXPECT_EQ(closest_key("model.moe", "topk", keys), "model.moe.top_k");
  EXPECT_EQ(closest_key("model.moe", "layers", keys), "model.layers");
}

TEST(Schema, EveryKeyIsUniqueAndFindable) {
  const std::vector<std::string> keys = key_names();
  // Every field of config.hpp's sections (stage_layers_balanced is stage_layers = "balanced",
  // resume_file is checkpoint.resume given a path, eval.enabled is the [eval] section's presence,
  // schedule.from_file is what schedule.file holds), and the six of [model.moe].
  EXPECT_EQ(keys.size(), 77u);
  for (const KeySpec& key : deck_keys()) {
    EXPECT_EQ(find_key(key.section, key.name), &key) << key.full_name();
  }
  EXPECT_EQ(section_names(), (std::vector<std::string>{"model", "model.moe", "parallel", "schedule", "train", "data",
                                                       "eval", "checkpoint", "output", "emulate"}));
  EXPECT_EQ(key_names_in("model.moe"), (std::vector<std::string>{"experts", "top_k", "expert_ffn_hidden", "layer_freq",
                                                                 "aux_loss_coef", "capacity_factor"}));
}

}  // namespace
}  // namespace trident
