#include "plan/partition.hpp"

#include <numeric>
#include <string>

#include "common/error.hpp"

namespace trident {
namespace {

std::vector<int> uniform_layer_counts(const ModelConfig& model, const ParallelConfig& parallel) {
  if (parallel.pp < 1 || parallel.pp > model.layers) {
    throw InputError("parallel.pp = " + std::to_string(parallel.pp) + " with model.layers = " +
                     std::to_string(model.layers) + ": every pipeline stage needs at least one layer; " +
                     "use 1 <= parallel.pp <= " + std::to_string(model.layers));
  }
  const int base = model.layers / parallel.pp;
  const int stages_with_extra_layer = model.layers % parallel.pp;
  std::vector<int> counts(parallel.pp, base);
  for (int stage = 0; stage < stages_with_extra_layer; ++stage) ++counts[stage];
  return counts;
}

const std::vector<int>& checked_explicit_layer_counts(const ModelConfig& model,
                                                      const ParallelConfig& parallel) {
  const std::vector<int>& counts = parallel.stage_layers;
  const std::string valid = "give one positive layer count per stage, summing to model.layers = " +
                            std::to_string(model.layers) + " (or leave it out for a uniform split)";
  if (static_cast<int>(counts.size()) != parallel.pp) {
    throw InputError("parallel.stage_layers has " + std::to_string(counts.size()) +
                     " entries but parallel.pp = " + std::to_string(parallel.pp) + ": " + valid);
  }
  for (std::size_t stage = 0; stage < counts.size(); ++stage) {
    if (counts[stage] < 1) {
      throw InputError("parallel.stage_layers[" + std::to_string(stage) + "] = " +
                       std::to_string(counts[stage]) + ": " + valid);
    }
  }
  const int sum = std::accumulate(counts.begin(), counts.end(), 0);
  if (sum != model.layers) {
    throw InputError("parallel.stage_layers sums to " + std::to_string(sum) + ": " + valid);
  }
  return counts;
}

}  // namespace

std::vector<StageLayers> partition_layers(const ModelConfig& model, const ParallelConfig& parallel) {
  const std::vector<int> counts = parallel.stage_layers.empty()
                                      ? uniform_layer_counts(model, parallel)
                                      : checked_explicit_layer_counts(model, parallel);
  std::vector<StageLayers> stages;
  int first_layer = 0;
  for (int count : counts) {
    stages.push_back({first_layer, count});
    first_layer += count;
  }
  return stages;
}

}  // namespace trident
