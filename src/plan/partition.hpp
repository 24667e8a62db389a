// Which layers each pipeline (virtual) stage holds (DESIGN.md "Parallel semantics", PP), and the
// compute cost model that balances them.
#pragma once

#include <string>
#include <vector>

#include "deck/config.hpp"
#include "schedule/placement.hpp"

namespace trident {

struct StageLayers {
  int first_layer = 0;
  int num_layers = 0;

  int end_layer() const { return first_layer + num_layers; }  // one past the last layer
  bool operator==(const StageLayers&) const = default;
};

// Forward FLOPs per token of the pieces a stage can hold (B = 2F: the backward costs twice as much,
// so every ratio below holds for the whole step). With C = d_model, T = seq_len, V = vocab:
//   layer      2 * block_params + 2*T*C   the weight matmuls (2 FLOPs per weight: qkv, proj, fc,
//                                         proj = 24 C^2 plus biases) and attention scores and
//                                         values (4*T*C, halved by the causal mask), as in
//                                         model_flops_per_step (plan/model_size.hpp)
//   embedding  C                          wte[tok] + wpe[pos]: one add per element
//   head       2*V*C + 8*C + 5*V          the tied head's logits, ln_f (about 8 FLOPs per element),
//                                         softmax cross-entropy (about 5 per logit)
// In units of layers the head weighs about V / (12 C) (GPT-2 124M: ~5 layers), the embedding
// about 1 / (24 C), i.e. next to nothing. Element-wise work is memory-bound and costs more time
// than its FLOPs say, but it is small next to the matmuls at any real width.
struct ForwardFlops {
  double layer = 0.0;
  double embedding = 0.0;
  double head = 0.0;  // ln_f + tied head + loss
};
ForwardFlops forward_flops_per_token(const ModelConfig& model);

// Forward FLOPs per token of one virtual stage: its layers, plus the embedding when it is the
// first virtual stage of the model and the head when it is the last.
double stage_forward_flops_per_token(const ModelConfig& model, const StageLayers& stage, bool first,
                                     bool last);

// The layers of every virtual stage: pp * chunks entries in model order, consecutive and covering
// every layer exactly once, each with at least one layer (which rank holds which virtual stage is
// the ChunkPlacement below). Any layers >= pp * chunks splits; nothing is dropped.
//   explicit   parallel.stage_layers (pp * chunks counts) is taken as given.
//   balanced   parallel.stage_layers_balanced (and no list): the split that minimises the largest
//              virtual stage cost of ForwardFlops (a layer costs 1, the first virtual stage adds
//              the embedding, the last the head). Because every layer costs the same, handing out
//              layers one at a time to the currently cheapest stage (ties: the earliest) after one
//              layer each is exact: it even minimises the sorted costs lexicographically.
//   uniform    otherwise: every virtual stage gets layers / (pp * chunks), and the first
//              layers % (pp * chunks) one more, since the last already carries the head.
// Throws InputError naming parallel.pp (and schedule.virtual_stages when chunks > 1) or
// parallel.stage_layers when no valid split exists; std::invalid_argument when chunks < 1.
std::vector<StageLayers> partition_layers(const ModelConfig& model, const ParallelConfig& parallel,
                                          int chunks = 1);

// The split of `layers` into `pieces` virtual stages (at least one layer each) that minimises the
// largest piece cost, a layer costing 1 and the first and last pieces carrying extra work (in
// layers): partition_layers' balanced split (ForwardFlops' embedding and head) and re-planning's
// (the measured ones) alike. Exact by water-filling, see partition_layers.
std::vector<int> balanced_layer_counts(int layers, int pieces, double first_extra, double last_extra);

// A partition from its layer counts (model order), and back (parallel.stage_layers' form).
std::vector<StageLayers> stages_from_counts(const std::vector<int>& counts);
std::vector<int> layer_counts(const std::vector<StageLayers>& stages);
std::string layer_counts_text(const std::vector<StageLayers>& stages);  // "3|1"

// The layers of pipeline rank `rank`'s chunks, chunk 0 first, of a partition_layers result with
// stages.size() a multiple of pp.
std::vector<StageLayers> rank_chunks(const std::vector<StageLayers>& stages, int pp, ChunkPlacement placement,
                                     int rank);

}  // namespace trident
