// The L2 norm of the whole model's gradient, over the entire TP × PP × DP grid, for clipping.
// Every element of the model is counted exactly once:
// - TP: a sharded tensor's slices are summed across the tp group; a replicated tensor (LayerNorms,
//   row-parallel biases, wpe), identical on every tp rank, is counted on tp rank 0 only.
// - PP: the stages are summed across the pp group; the tied head's copy of "wte.weight" on the last
//   stage is not counted (stage 0's copy is; their gradients are equal after the embedding sum).
// - DP: without ZeRO-1 every replica holds the same reduced gradient, so nothing is summed across
//   dp; with ZeRO-1 each rank holds only its pieces, which are summed across dp. Under expert
//   parallelism the replicas hold different experts: without ZeRO-1 the first replica counts the
//   dense tensors and the first ep replicas their experts, summed across dp.
// The squared norm stays in device memory, where the optimizer's kernel reads it (optim/optimizer.hpp's
// GradClip): one reduction over the gradients this rank counts, then its sum over the groups; the
// trainer reads it with the step's other figures (train/step_figures.hpp).
#pragma once

#include "dp/gradient_sync.hpp"
#include "grid/process_grid.hpp"
#include "optim/element_runs.hpp"

namespace trident {

class GlobalGradNorm {
 public:
  // Which of sync's reduced gradients this rank counts is fixed here; both must outlive this.
  GlobalGradNorm(const GradientSync& sync, const ProcessGrid& grid);

  // *squared (one device double) = the squared norm, the same on every rank. Collective over
  // grid.tp_group, pp_group and (ZeRO-1) dp_cp_group; call after sync.finish(). Queued: the host does
  // not wait for it.
  void compute(double* squared);

 private:
  const GradientSync& sync_;
  const ProcessGrid& grid_;
  ElementRuns counted_;  // the pieces of the reduced gradients this rank counts
};

}  // namespace trident
