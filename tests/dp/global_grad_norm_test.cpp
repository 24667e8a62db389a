// The global gradient norm over every grid that fits the world: each element of the model counted
// once, whatever is sharded (TP), split into stages (PP) or replicated or sharded across DP.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "dp/global_grad_norm.hpp"
#include "dp_test_support.hpp"

namespace trident {
namespace {

using namespace dp_test;

struct TensorSpec {
  std::string name;
  std::vector<std::int64_t> shape;  // global (HF) shape
  int shard_dim = -1;
  int shard_blocks = 1;
};

// A small model cut into `stages`: vocab-parallel wte (10 rows: padded for tp = 3, 4), replicated
// wpe and LayerNorms, column-parallel c_attn (q|k|v blocks) and c_fc, a replicated row-parallel
// bias; the last stage of a pipeline also holds the tied head's copy of wte.
std::vector<TensorSpec> stage_tensors(int stage, int stages) {
  std::vector<TensorSpec> tensors;
  if (stage == 0) {
    tensors.push_back({"wte.weight", {10, 4}, 0});
    tensors.push_back({"wpe.weight", {5, 4}});
  }
  const std::string layer = "h." + std::to_string(stage) + ".";
  tensors.push_back({layer + "ln_1.weight", {4}});
  tensors.push_back({layer + "attn.c_attn.weight", {4, 12}, 1, 3});
  tensors.push_back({layer + "attn.c_attn.bias", {12}, 0, 3});
  tensors.push_back({layer + "attn.c_proj.bias", {4}});
  tensors.push_back({layer + "mlp.c_fc.weight", {4, 16}, 1});
  if (stage == stages - 1) {
    tensors.push_back({"ln_f.weight", {4}});
    if (stages > 1) tensors.push_back({"wte.weight", {10, 4}, 0});
  }
  return tensors;
}

bool is_head_copy(const std::string& name, int stage) { return name == "wte.weight" && stage != 0; }

// The reduced gradient of global element `global` of a tensor: the same on every TP and DP rank.
// The head's copy of wte differs, so that counting it would show.
float reduced_gradient(const std::string& name, int stage, std::int64_t global) {
  if (is_head_copy(name, stage)) return 1.0f;
  const int salt = std::accumulate(name.begin(), name.end(), 0) % 7;
  return static_cast<float>((global * 3 + salt) % 11 - 5) * 0.125f;
}

// Sum of squares of the whole model, each tensor once, from global shapes (no parallelism).
double expected_sum_of_squares(int stages) {
  double sum = 0.0;
  for (int stage = 0; stage < stages; ++stage)
    for (const TensorSpec& spec : stage_tensors(stage, stages)) {
      if (is_head_copy(spec.name, stage)) continue;
      const std::int64_t size = std::accumulate(spec.shape.begin(), spec.shape.end(), std::int64_t{1},
                                                std::multiplies<>());
      for (std::int64_t i = 0; i < size; ++i) {
        const double g = reduced_gradient(spec.name, stage, i);
        sum += g * g;
      }
    }
  return sum;
}

// This rank's slice of its stage, with gradients that sum over dp to the reduced ones: dp rank 0
// holds them, the other replicas hold zeros.
ParamStore rank_store(const ProcessGrid& grid) {
  ParamStore params(grid.tp_rank(), grid.tp_size());
  for (const TensorSpec& spec : stage_tensors(grid.pp_rank(), grid.pp_size()))
    params.add(spec.name, spec.shape, spec.shard_dim, spec.shard_blocks);
  params.allocate();
  std::vector<float> grads(params.total_size(), 0.0f);
  if (grid.dp_rank() == 0)
    for (const ParamTensor& tensor : params.tensors())
      for (std::size_t i = 0; i < tensor.size; ++i) {
        const std::int64_t global = global_index(tensor, static_cast<std::int64_t>(i), grid.tp_rank(), grid.tp_size());
        grads[tensor.offset + i] = global < 0 ? 0.0f : reduced_gradient(tensor.name, grid.pp_rank(), global);
      }
  from_host(params.grads, grads);
  return params;
}

std::vector<ParallelConfig> grids_of(int ranks) {
  std::vector<ParallelConfig> grids;
  for (int tp = 1; tp <= ranks; ++tp)
    for (int pp = 1; tp * pp <= ranks; ++pp)
      if (ranks % (tp * pp) == 0) {
        ParallelConfig config;
        config.tp = tp;
        config.pp = pp;
        config.dp = ranks / (tp * pp);
        grids.push_back(config);
      }
  return grids;
}

TEST(GlobalGradNorm, CountsEveryElementOnceOnEveryGrid) {
  for (const ParallelConfig& config : grids_of(world_size())) {
    const ProcessGrid grid = make_process_grid(MPI_COMM_WORLD, config);
    const double expected = std::sqrt(expected_sum_of_squares(config.pp));
    for (bool zero1 : {false, true}) {
      ParamStore params = rank_store(grid);
      GradientSync sync(params, *grid.dp_cp_group, 3 * sizeof(float), zero1);  // pieces cut tensors
      sync.finish();
      Kokkos::View<double, MemSpace> squared("squared");
      GlobalGradNorm(sync, grid).compute(squared.data());
      double host = 0.0;
      Kokkos::deep_copy(host, squared);
      EXPECT_DOUBLE_EQ(std::sqrt(host), expected)
          << "tp " << config.tp << ", pp " << config.pp << ", dp " << config.dp << (zero1 ? ", ZeRO-1" : "");
    }
  }
}

}  // namespace
}  // namespace trident
