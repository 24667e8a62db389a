// ZeRO-1 AdamW: each data-parallel rank keeps the moments of, and updates, only the parameters
// whose reduced gradients it holds (its piece of every bucket, plan/buckets.hpp); the updated
// parameters are then all-gathered, so every rank ends the step with the same weights as plain
// AdamW on the summed gradient. Optimizer memory per rank: 2 floats per parameter / dp.
#pragma once

#include "deck/config.hpp"
#include "dp/gradient_sync.hpp"
#include "kernels/device.hpp"
#include "optim/element_runs.hpp"
#include "optim/optimizer.hpp"

namespace trident {

class ShardedAdamW final : public Optimizer {
 public:
  // `sync` must run in ZeRO-1 mode; the optimizer reads its reduced gradients after finish().
  ShardedAdamW(GradientSync& sync, const TrainConfig& train);

  // This rank's moments, laid out as sync.reduced_grads() (sync.shard_size() elements; the
  // padding elements stay 0).
  FloatBuffer m;
  FloatBuffer v;

  // Collective over the dp group: this rank's pieces placed in the full layout, then all-gathered.
  Moments full_moments() override;
  void import_moments(const Moments& moments) override;

 private:
  // Updates this rank's pieces of params.values (params must be sync's store), then all-gathers.
  void update(ParamStore& params, int step, double lr, const GradClip& clip) override;

  GradientSync& sync_;
  TrainConfig train_;
  ElementRuns runs_;  // the pieces of tensors this rank holds, at their places in the shard
};

}  // namespace trident
