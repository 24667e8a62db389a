#include "plan/partition.hpp"

#include <numeric>
#include <queue>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "plan/model_size.hpp"

namespace trident {
namespace {

std::string str(std::int64_t value) { return std::to_string(value); }

// "parallel.pp = 4" or "parallel.pp = 4 x schedule.virtual_stages = 2": what sets the piece count.
std::string pieces_text(const ParallelConfig& parallel, int chunks) {
  std::string text = "parallel.pp = " + str(parallel.pp);
  if (chunks > 1) text += " x schedule.virtual_stages = " + str(chunks);
  return text;
}

int checked_piece_count(const ModelConfig& model, const ParallelConfig& parallel, int chunks) {
  if (chunks < 1) throw std::invalid_argument("partition_layers: chunks = " + str(chunks) + ", expected >= 1");
  const std::int64_t pieces = std::int64_t{parallel.pp} * chunks;
  if (parallel.pp < 1 || pieces > model.layers) {
    throw InputError(pieces_text(parallel, chunks) + " with model.layers = " + str(model.layers) +
                     ": every pipeline stage needs at least one layer; use 1 <= " +
                     (chunks > 1 ? "pp * virtual_stages" : std::string("parallel.pp")) + " <= " +
                     str(model.layers));
  }
  return static_cast<int>(pieces);
}

std::vector<int> uniform_layer_counts(int layers, int pieces) {
  std::vector<int> counts(pieces, layers / pieces);
  for (int piece = 0; piece < layers % pieces; ++piece) ++counts[piece];
  return counts;
}

const std::vector<int>& checked_explicit_layer_counts(const ModelConfig& model, const ParallelConfig& parallel,
                                                      int pieces, int chunks) {
  const std::vector<int>& counts = parallel.stage_layers;
  const std::string valid = "give one positive layer count per " +
                            std::string(chunks > 1 ? "virtual stage (model order)" : "stage") +
                            ", summing to model.layers = " + str(model.layers) +
                            " (or \"balanced\", or leave it out for a uniform split)";
  if (static_cast<int>(counts.size()) != pieces) {
    throw InputError("parallel.stage_layers has " + str(static_cast<std::int64_t>(counts.size())) +
                     " entries but " + pieces_text(parallel, chunks) + ": " + valid);
  }
  for (std::size_t stage = 0; stage < counts.size(); ++stage) {
    if (counts[stage] < 1) {
      throw InputError("parallel.stage_layers[" + str(static_cast<std::int64_t>(stage)) + "] = " +
                       str(counts[stage]) + ": " + valid);
    }
  }
  const std::int64_t sum = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  if (sum != model.layers) throw InputError("parallel.stage_layers sums to " + str(sum) + ": " + valid);
  return counts;
}

}  // namespace

ForwardFlops forward_flops_per_token(const ModelConfig& model) {
  const double c = model.d_model;
  const double t = model.seq_len;
  const double v = model.vocab;
  return {.layer = 2.0 * mean_active_block_params(model) + 2.0 * t * c,
          .embedding = c,
          .head = 2.0 * v * c + 8.0 * c + 5.0 * v};
}

double stage_forward_flops_per_token(const ModelConfig& model, const StageLayers& stage, bool first,
                                     bool last) {
  const ForwardFlops flops = forward_flops_per_token(model);
  return stage.num_layers * flops.layer + (first ? flops.embedding : 0.0) + (last ? flops.head : 0.0);
}

std::vector<int> balanced_layer_counts(int layers, int pieces, double first_extra, double last_extra) {
  std::vector<double> extra(pieces, 0.0);  // in layers
  extra.front() += first_extra;
  extra.back() += last_extra;
  std::vector<int> counts(pieces, 1);
  using Entry = std::pair<double, int>;  // (cost after one more layer, piece): smallest first
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> cheapest;
  for (int piece = 0; piece < pieces; ++piece) cheapest.push({counts[piece] + 1 + extra[piece], piece});
  for (int left = layers - pieces; left > 0; --left) {
    const int piece = cheapest.top().second;
    cheapest.pop();
    ++counts[piece];
    cheapest.push({counts[piece] + 1 + extra[piece], piece});
  }
  return counts;
}

std::vector<StageLayers> stages_from_counts(const std::vector<int>& counts) {
  std::vector<StageLayers> stages;
  int first_layer = 0;
  for (int count : counts) {
    stages.push_back({first_layer, count});
    first_layer += count;
  }
  return stages;
}

std::vector<int> layer_counts(const std::vector<StageLayers>& stages) {
  std::vector<int> counts;
  for (const StageLayers& stage : stages) counts.push_back(stage.num_layers);
  return counts;
}

std::string layer_counts_text(const std::vector<StageLayers>& stages) {
  std::string text;
  for (const StageLayers& stage : stages) text.append(text.empty() ? "" : "|").append(str(stage.num_layers));
  return text;
}

std::vector<StageLayers> partition_layers(const ModelConfig& model, const ParallelConfig& parallel, int chunks) {
  const int pieces = checked_piece_count(model, parallel, chunks);
  std::vector<int> counts;
  if (!parallel.stage_layers.empty()) {
    counts = checked_explicit_layer_counts(model, parallel, pieces, chunks);
  } else if (parallel.stage_layers_balanced) {
    const ForwardFlops flops = forward_flops_per_token(model);
    counts = balanced_layer_counts(model.layers, pieces, flops.embedding / flops.layer, flops.head / flops.layer);
  } else {
    counts = uniform_layer_counts(model.layers, pieces);
  }
  return stages_from_counts(counts);
}

std::vector<StageLayers> rank_chunks(const std::vector<StageLayers>& stages, int pp, ChunkPlacement placement,
                                     int rank) {
  if (pp < 1 || rank < 0 || rank >= pp || stages.size() % pp != 0) {
    throw std::invalid_argument("rank_chunks: rank " + str(rank) + " of pp " + str(pp) + " with " +
                                str(static_cast<std::int64_t>(stages.size())) + " virtual stages");
  }
  const int chunks = static_cast<int>(stages.size()) / pp;
  std::vector<StageLayers> layers;
  for (int chunk = 0; chunk < chunks; ++chunk)
    layers.push_back(stages[placed_virtual_stage(placement, pp, chunks, rank, chunk)]);
  return layers;
}

}  // namespace trident
