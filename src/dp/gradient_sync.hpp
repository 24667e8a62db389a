// Data-parallel gradient reduction overlapped with backward (DESIGN.md "Parallel semantics").
//
// The pipeline stage (pipeline/model_stage.hpp) hands hook() to the model's backward, or W, after
// which a chunk's weight gradients of the step are final; the model reports each range of
// gradients as it completes, and as soon as every gradient of a bucket (plan/buckets.hpp) is final,
// the bucket's reduction starts without blocking. finish() then waits for what is still in flight. Afterwards the
// gradients are SUMMED over the dp group: with loss_scale = 1 / (tokens of the global batch), that sum is the gradient
// of the global-batch mean loss.
//
// Two modes:
// - all-reduce (plain DP): every rank then holds the whole reduced gradient in params.grads.
// - ZeRO-1: each bucket is reduce-scattered, so a rank holds only its piece of every bucket, in a
//   shard buffer (reduced_grads()); ShardedAdamW updates those pieces and all_gather_params()
//   brings every rank the whole updated parameters.
// Buckets are reduced strictly in bucket order, which is the same on every rank whatever order
// the ranges are reported in (MPI requires the same order of collectives on every rank).
//
// Expert parallelism ([model.moe], parallel.ep): the experts' tensors (ParamTensor::expert) differ
// between the ranks of an ep group; their buckets are reduced over the ranks that hold the same
// experts (the expert-data-parallel group) and, under ZeRO-1, sharded over those.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "comm/comm.hpp"
#include "kernels/device.hpp"
#include "model/param_store.hpp"
#include "plan/buckets.hpp"

namespace trident {

class GradientSync {
 public:
  using ReadyFn = std::function<void(std::size_t offset, std::size_t count)>;

  // `params` must be allocated; `dp` is this rank's data-parallel group; `expert_dp` the
  // expert-data-parallel group under expert parallelism (else null). bucket_bytes of float
  // gradients per bucket (the deck's parallel.bucket_mb), at least one element.
  GradientSync(ParamStore& params, Comm& dp, std::size_t bucket_bytes, bool zero1, Comm* expert_dp = nullptr);

  // The callback for Transformer::backward's grads_ready: forwards to on_grads_ready. Empty (so backward
  // skips it) when a group of one has nothing to overlap.
  ReadyFn hook();

  // Flat gradients [offset, offset + count) are final for this step; each element is reported at
  // most once per step. Launches the buckets that became complete and advances those in flight.
  void on_grads_ready(std::size_t offset, std::size_t count);

  // Launches the buckets not launched yet (their gradients are final now), waits for every
  // reduction of the step and resets for the next one.
  void finish();

  // ZeRO-1, after the optimizer updated this rank's pieces of params.values: every rank gets all
  // of them (one all-gather per bucket). Nothing to do without ZeRO-1 or in a group of one.
  void all_gather_params();
  // The same for any buffer in the layout of params.values whose pieces sit where this rank's
  // pieces of the gradients do (the optimizer's moments, for checkpoints).
  void all_gather_in_place(FloatBuffer& buffer);

  // The reduced gradients this rank holds after finish(): ranges of reduced_grads(). Without
  // ZeRO-1 that is the whole of params.grads; with it, this rank's piece of each bucket.
  const std::vector<HeldRange>& held_ranges() const { return held_; }
  const float* reduced_grads() const;
  bool zero1() const { return zero1_; }
  // Elements of the shard buffer (pieces with their padding); 0 without ZeRO-1.
  std::size_t shard_size() const { return zero1_ ? shard_grads_.extent(0) : 0; }

  const std::vector<Bucket>& buckets() const { return buckets_; }
  const ParamStore& params() const { return params_; }
  // Buckets whose reduction has started in the current step (0 again after finish()).
  std::size_t launched_buckets() const { return launched_; }
  // Seconds of the last step this rank spent in data-parallel communication rather than compute:
  // launching and progressing buckets in on_grads_ready(), finish()'s wait and, under ZeRO-1,
  // all_gather_params(). Progress calls count too: MPI over shared memory does its copies and
  // sums inside them, on the core that would otherwise run backward.
  double last_exposed_seconds() const { return exposed_seconds_; }

 private:
  void launch(const Bucket& bucket);
  void launch_complete_buckets();
  Comm& group_of(const Bucket& bucket) const { return bucket.experts ? *expert_dp_ : dp_; }

  ParamStore& params_;
  Comm& dp_;
  Comm* expert_dp_;
  bool zero1_;
  bool active_;  // false for plain DP in a group of one: nothing to reduce
  std::vector<Bucket> buckets_;
  std::vector<HeldRange> held_;
  std::vector<std::size_t> ready_;  // per bucket: elements reported final this step
  std::size_t launched_ = 0;
  std::vector<CommRequestPtr> in_flight_;
  FloatBuffer shard_grads_;     // ZeRO-1: this rank's reduced pieces
  FloatBuffer padded_grads_;    // ZeRO-1: a padded bucket's gradients, zeros after its end
  FloatBuffer padded_values_;   // ZeRO-1: a padded bucket's parameters during the all-gather
  double step_seconds_ = 0.0;  // communication time of the step in progress
  double exposed_seconds_ = 0.0;
};

}  // namespace trident
