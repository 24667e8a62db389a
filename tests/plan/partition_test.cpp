#include "plan/partition.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "plan/model_size.hpp"

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

ParallelConfig balanced_pipeline(int pp) {
  ParallelConfig parallel = pipeline(pp);
  parallel.stage_layers_balanced = true;
  return parallel;
}

// GPT-2 124M's shape with `layers` layers: the head weighs about five layers.
ModelConfig gpt2_with_layers(int layers) {
  return {.layers = layers, .d_model = 768, .heads = 12, .seq_len = 1024, .vocab = 50257};
}

std::vector<int> counts_of(const std::vector<StageLayers>& stages) {
  std::vector<int> counts;
  for (const StageLayers& stage : stages) counts.push_back(stage.num_layers);
  return counts;
}

// The largest virtual stage cost in layers (the quantity "balanced" minimises).
double max_stage_cost(const ModelConfig& model, const std::vector<int>& counts) {
  const ForwardFlops flops = forward_flops_per_token(model);
  double worst = 0.0;
  for (std::size_t s = 0; s < counts.size(); ++s) {
    const double cost = counts[s] + (s == 0 ? flops.embedding / flops.layer : 0.0) +
                        (s + 1 == counts.size() ? flops.head / flops.layer : 0.0);
    worst = std::max(worst, cost);
  }
  return worst;
}

// The smallest largest-stage cost over every split of `layers` into `pieces` non-empty stages.
double best_max_cost_by_brute_force(const ModelConfig& model, int pieces) {
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> counts;
  const std::function<void(int)> split = [&](int left) {
    if (static_cast<int>(counts.size()) == pieces - 1) {
      counts.push_back(left);
      best = std::min(best, max_stage_cost(model, counts));
      counts.pop_back();
      return;
    }
    for (int take = 1; take <= left - (pieces - 1 - static_cast<int>(counts.size())); ++take) {
      counts.push_back(take);
      split(left - take);
      counts.pop_back();
    }
  };
  split(model.layers);
  return best;
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
                               const std::string& key, int chunks = 1) {
  try {
    partition_layers(model, parallel, chunks);
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

TEST(Partition, ForwardFlopsFollowTheModelSizeFormulas) {
  const ModelConfig model = gpt2_with_layers(12);
  const ForwardFlops flops = forward_flops_per_token(model);
  EXPECT_DOUBLE_EQ(flops.layer, 2.0 * block_params(model) + 2.0 * 1024 * 768);
  EXPECT_DOUBLE_EQ(flops.head, 2.0 * 50257 * 768 + 8.0 * 768 + 5.0 * 50257);
  EXPECT_DOUBLE_EQ(flops.embedding, 768.0);
  // The head weighs about V / (12 C) layers (a bit less: attention adds to a layer).
  EXPECT_NEAR(flops.head / flops.layer, 4.92, 0.01);
  // Forward FLOPs of the whole model x 3 (forward + backward) = model_flops_per_step, up to the
  // element-wise terms that formula leaves out.
  const double forward = stage_forward_flops_per_token(model, {0, 12}, true, true);
  EXPECT_NEAR(3.0 * forward / model_flops_per_step(model, 1), 1.0, 1e-3);
}

TEST(Partition, UniformChunksSplitIntoPpTimesChunksPiecesInModelOrder) {
  const auto stages = partition_layers(model_with_layers(10), pipeline(2), 2);
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_EQ(counts_of(stages), (std::vector<int>{3, 3, 2, 2}));
  expect_covers_every_layer_once(stages, 10);
  // Interleaved, rank 0 holds virtual stages 0 and 2, rank 1 holds 1 and 3.
  EXPECT_EQ(rank_chunks(stages, 2, ChunkPlacement::interleaved, 0), (std::vector<StageLayers>{{0, 3}, {6, 2}}));
  EXPECT_EQ(rank_chunks(stages, 2, ChunkPlacement::interleaved, 1), (std::vector<StageLayers>{{3, 3}, {8, 2}}));
  // In a V, rank 0 holds virtual stages 0 and 3 (the embedding and the head), rank 1 holds 1 and 2.
  EXPECT_EQ(rank_chunks(stages, 2, ChunkPlacement::v_shape, 0), (std::vector<StageLayers>{{0, 3}, {8, 2}}));
  EXPECT_EQ(rank_chunks(stages, 2, ChunkPlacement::v_shape, 1), (std::vector<StageLayers>{{3, 3}, {6, 2}}));
}

TEST(Partition, PlacementsPutEveryVirtualStageOnExactlyOneRankChunk) {
  for (const ChunkPlacement placement : {ChunkPlacement::interleaved, ChunkPlacement::v_shape}) {
    for (int pp = 1; pp <= 5; ++pp) {
      std::vector<int> seen(2 * pp, 0);
      for (int rank = 0; rank < pp; ++rank)
        for (int chunk = 0; chunk < 2; ++chunk) {
          const int stage = placed_virtual_stage(placement, pp, 2, rank, chunk);
          ++seen.at(stage);
          const ChunkPosition position = chunk_position(placement, pp, stage);
          EXPECT_EQ(position.rank, rank);
          EXPECT_EQ(position.chunk, chunk);
        }
      EXPECT_EQ(seen, std::vector<int>(2 * pp, 1));
      EXPECT_EQ(head_rank(placement, pp), chunk_position(placement, pp, 2 * pp - 1).rank);
    }
  }
  EXPECT_EQ(placed_virtual_stage(ChunkPlacement::v_shape, 4, 2, 1, 1), 6);  // 2p - 1 - r
  EXPECT_EQ(chunk_placement(ScheduleKind::zb_v), ChunkPlacement::v_shape);
  EXPECT_EQ(chunk_placement(ScheduleKind::interleaved_1f1b), ChunkPlacement::interleaved);
}

TEST(Partition, ExplicitCountsPerVirtualStage) {
  const auto stages = partition_layers(model_with_layers(8), pipeline(2, {1, 2, 3, 2}), 2);
  EXPECT_EQ(counts_of(stages), (std::vector<int>{1, 2, 3, 2}));
  expect_covers_every_layer_once(stages, 8);
  expect_input_error_naming(model_with_layers(8), pipeline(2, {4, 4}), "parallel.stage_layers", 2);
  expect_input_error_naming(model_with_layers(8), pipeline(2, {4, 4}), "schedule.virtual_stages = 2", 2);
}

TEST(Partition, EveryLayerExactlyOnceForManyShapes) {
  for (const bool balanced : {false, true}) {
    for (int layers = 1; layers <= 30; ++layers) {
      for (int pp = 1; pp <= layers; ++pp) {
        for (int chunks = 1; pp * chunks <= layers && chunks <= 4; ++chunks) {
          ParallelConfig parallel = pipeline(pp);
          parallel.stage_layers_balanced = balanced;
          const auto stages = partition_layers(gpt2_with_layers(layers), parallel, chunks);
          ASSERT_EQ(static_cast<int>(stages.size()), pp * chunks);
          expect_covers_every_layer_once(stages, layers);
        }
      }
    }
  }
}

TEST(Partition, BalancedMovesLayersAwayFromTheLastStageForALargeVocabulary) {
  const ModelConfig model = gpt2_with_layers(30);
  const auto uniform = partition_layers(model, pipeline(4));
  const auto balanced = partition_layers(model, balanced_pipeline(4));
  expect_covers_every_layer_once(balanced, 30);
  // The head weighs ~4.9 layers: the last stage gets ~5 layers fewer than the others; the
  // embedding, next to nothing, still loses the tie for the ninth layer.
  EXPECT_EQ(counts_of(balanced), (std::vector<int>{8, 9, 9, 4}));
  EXPECT_LT(max_stage_cost(model, counts_of(balanced)), max_stage_cost(model, counts_of(uniform)));
}

TEST(Partition, BalancedWithATinyVocabularyIsAsEvenAsUniform) {
  ModelConfig model = gpt2_with_layers(30);
  model.vocab = 256;  // the head weighs 0.03 layers
  const auto stages = partition_layers(model, balanced_pipeline(4));
  const auto counts = counts_of(stages);
  EXPECT_EQ(*std::max_element(counts.begin(), counts.end()), 8);
  EXPECT_EQ(*std::min_element(counts.begin(), counts.end()), 7);
  EXPECT_LE(counts.back(), counts[1]);  // ties go away from the head
}

TEST(Partition, BalancedIsExactAgainstEverySplit) {
  for (const int vocab : {256, 8192, 50257, 400000}) {
    for (int layers = 1; layers <= 12; ++layers) {
      for (int pieces = 1; pieces <= std::min(layers, 5); ++pieces) {
        ModelConfig model = gpt2_with_layers(layers);
        model.vocab = vocab;
        const auto stages = partition_layers(model, balanced_pipeline(pieces));
        EXPECT_NEAR(max_stage_cost(model, counts_of(stages)), best_max_cost_by_brute_force(model, pieces), 1e-9)
            << "vocab " << vocab << ", " << layers << " layers on " << pieces << " stages";
      }
    }
  }
}

TEST(Partition, BalancedChunksKeepTheHeadOnTheLastVirtualStage) {
  const ModelConfig model = gpt2_with_layers(24);
  const auto stages = partition_layers(model, balanced_pipeline(2), 3);
  ASSERT_EQ(stages.size(), 6u);
  expect_covers_every_layer_once(stages, 24);
  EXPECT_LT(stages.back().num_layers, stages.front().num_layers);
}

TEST(Partition, RejectsTooManyChunksNamingTheKeys) {
  expect_input_error_naming(model_with_layers(6), pipeline(2), "parallel.pp = 2 x schedule.virtual_stages = 4", 4);
  expect_input_error_naming(model_with_layers(6), balanced_pipeline(7), "parallel.pp");
  EXPECT_THROW(partition_layers(model_with_layers(6), pipeline(2), 0), std::invalid_argument);
  EXPECT_THROW(rank_chunks(partition_layers(model_with_layers(6), pipeline(2)), 2, ChunkPlacement::interleaved, 2),
               std::invalid_argument);
}

}  // namespace
}  // namespace trident
