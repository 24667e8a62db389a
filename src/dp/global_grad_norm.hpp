// The L2 norm of the whole model's gradient, over the entire TP × PP × DP grid, for clipping.
// Every element of the model is counted exactly once:
// - TP: a sharded tensor's slices are summed across the tp group; a replicated tensor (LayerNorms,
//   row-parallel biases, wpe), identical on every tp rank, is counted on tp rank 0 only.
// - PP: the stages are summed across the pp group; the tied head's copy of "wte.weight" on the last
//   stage is not counted (stage 0's copy is; their gradients are equal after the embedding sum).
// - DP: without ZeRO-1 every replica holds the same reduced gradient, so nothing is summed across
//   dp; with ZeRO-1 each rank holds only its pieces, which are summed across dp.
#pragma once

#include "dp/gradient_sync.hpp"
#include "grid/process_grid.hpp"

namespace trident {

// Collective over grid.tp_group, pp_group and (ZeRO-1) dp_group; call after sync.finish(). The same value
// on every rank.
double global_grad_norm(const GradientSync& sync, const ProcessGrid& grid);

}  // namespace trident
