#include "plan/partition.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"

namespace trident {
namespace {

ModelConfig model_with_layers(int layers) {
  ModelConfig model;
  model.layers = layers;
  return model;
}

ParallelConfig pipeline(int pp, std::vector<int> stage_layers = {}) {
  ParallelConfig parallel;
  parallel.pp = pp;
  parallel.stage_layers = std::move(stage_layers);
  return parallel;
}

// Every layer in exactly one stage, stages consecutive in order.
void expect_covers_every_layer_once(const std::vector<StageLayers>& stages, int layers) {
  std::vector<int> owners(layers, 0);
  int next = 0;
  for (const StageLayers& stage : stages) {
    EXPECT_EQ(stage.first_layer, next);
    EXPECT_GE(stage.num_layers, 1);
    for (int layer = stage.first_layer; layer < stage.end_layer(); ++layer) {
      ASSERT_LT(layer, layers);
      ++owners[layer];
    }
    next = stage.end_layer();
  }
  EXPECT_EQ(next, layers);
  for (int layer = 0; layer < layers; ++layer) EXPECT_EQ(owners[layer], 1) << "layer " << layer;
}

void expect_input_error_naming(const ModelConfig& model, const ParallelConfig& parallel,
                               const std::string& key) {
  try {
    partition_layers(model, parallel);
    FAIL() << "no error, expected one naming " << key;
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find(key), std::string::npos) << error.what();
  }
}

TEST(Partition, UniformThirtyLayersOnFourStagesGivesExtrasToEarlyStages) {
  const auto stages = partition_layers(model_with_layers(30), pipeline(4));
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_EQ(stages[0], (StageLayers{0, 8}));
  EXPECT_EQ(stages[1], (StageLayers{8, 8}));
  EXPECT_EQ(stages[2], (StageLayers{16, 7}));
  EXPECT_EQ(stages[3], (StageLayers{23, 7}));
  expect_covers_every_layer_once(stages, 30);
}

TEST(Partition, UniformIsBalancedForManyShapes) {
  for (int layers = 1; layers <= 40; ++layers) {
    for (int pp = 1; pp <= layers; ++pp) {
      const auto stages = partition_layers(model_with_layers(layers), pipeline(pp));
      ASSERT_EQ(static_cast<int>(stages.size()), pp);
      expect_covers_every_layer_once(stages, layers);
      for (std::size_t s = 1; s < stages.size(); ++s) {
        EXPECT_LE(stages[s].num_layers, stages[s - 1].num_layers);
        EXPECT_LE(stages[0].num_layers - stages[s].num_layers, 1);
      }
    }
  }
}

TEST(Partition, SingleStageHoldsEverything) {
  const auto stages = partition_layers(model_with_layers(12), pipeline(1));
  ASSERT_EQ(stages.size(), 1u);
  EXPECT_EQ(stages[0], (StageLayers{0, 12}));
}

TEST(Partition, ExplicitStageLayersAreTakenAsGiven) {
  const auto stages = partition_layers(model_with_layers(30), pipeline(3, {5, 10, 15}));
  ASSERT_EQ(stages.size(), 3u);
  EXPECT_EQ(stages[0], (StageLayers{0, 5}));
  EXPECT_EQ(stages[1], (StageLayers{5, 10}));
  EXPECT_EQ(stages[2], (StageLayers{15, 15}));
  expect_covers_every_layer_once(stages, 30);
}

TEST(Partition, RejectsImpossibleSplitsNamingTheKey) {
  expect_input_error_naming(model_with_layers(2), pipeline(3), "parallel.pp");
  expect_input_error_naming(model_with_layers(30), pipeline(3, {10, 20}), "parallel.stage_layers");
  expect_input_error_naming(model_with_layers(30), pipeline(3, {10, 0, 20}), "parallel.stage_layers[1]");
  expect_input_error_naming(model_with_layers(30), pipeline(3, {10, -2, 22}), "parallel.stage_layers[1]");
  expect_input_error_naming(model_with_layers(30), pipeline(3, {10, 10, 11}), "parallel.stage_layers");
  expect_input_error_naming(model_with_layers(30), pipeline(3, {10, 10, 11}), "sums to 31");
}

}  // namespace
}  // namespace trident
