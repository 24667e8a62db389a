#include "dp/gradient_sync.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "kernels/copy.hpp"
#include "kernels/profile.hpp"

namespace trident {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The buffer's regions: all of it over dp, or the runs of experts' tensors over expert_dp and the
// runs between them over dp.
std::vector<BucketRegion> regions(const ParamStore& params, const Comm& dp, const Comm* expert_dp) {
  if (!expert_dp) return {{0, params.total_size(), dp.size(), false}};
  std::vector<BucketRegion> out;
  for (const ParamTensor& tensor : params.tensors()) {
    const bool experts = tensor.expert >= 0;
    if (out.empty() || out.back().experts != experts)
      out.push_back({tensor.offset, 0, experts ? expert_dp->size() : dp.size(), experts});
    out.back().size += tensor.size;
  }
  return out;
}

}  // namespace

GradientSync::GradientSync(ParamStore& params, Comm& dp, std::size_t bucket_bytes, bool zero1, Comm* expert_dp)
    : params_(params),
      dp_(dp),
      expert_dp_(expert_dp),
      zero1_(zero1),
      active_(zero1 || dp.size() > 1),
      buckets_(plan_buckets(regions(params, dp, expert_dp), std::max<std::size_t>(1, bucket_bytes / sizeof(float)))),
      ready_(buckets_.size(), 0) {
  if (params.grads.extent(0) != params.total_size())
    throw std::logic_error("GradientSync: the parameter store is not allocated");
  if (!zero1) {
    held_.push_back({0, params.total_size(), 0});
    return;
  }
  shard_grads_ = FloatBuffer("zero1_grads", trident::shard_size(buckets_));
  for (const Bucket& bucket : buckets_)
    if (const HeldRange owned = bucket.owned_by(group_of(bucket).rank()); owned.count > 0) held_.push_back(owned);
  if (const std::size_t padded = largest_padded_bucket(buckets_); padded > 0) {
    padded_grads_ = FloatBuffer("zero1_padded_grads", padded);
    padded_values_ = FloatBuffer("zero1_padded_values", padded);
  }
}

GradientSync::ReadyFn GradientSync::hook() {
  if (dp_.size() == 1) return {};
  return [this](std::size_t offset, std::size_t count) { on_grads_ready(offset, count); };
}

void GradientSync::on_grads_ready(std::size_t offset, std::size_t count) {
  if (!active_) return;
  const auto start = std::chrono::steady_clock::now();
  const std::size_t end = offset + count;
  if (end > params_.total_size())
    throw std::logic_error("GradientSync: gradients [" + std::to_string(offset) + ", " + std::to_string(end) +
                           ") reported ready, but the store holds " + std::to_string(params_.total_size()));
  while (offset < end) {
    // Buckets lie in decreasing offset order; find the one holding `offset`.
    const auto bucket = std::partition_point(buckets_.begin(), buckets_.end(),
                                             [&](const Bucket& b) { return b.offset > offset; });
    const std::size_t index = static_cast<std::size_t>(bucket - buckets_.begin());
    const std::size_t taken = std::min(end, bucket->offset + bucket->size) - offset;
    ready_[index] += taken;
    if (ready_[index] > bucket->size)
      throw std::logic_error("GradientSync: gradients of bucket " + std::to_string(index) +
                             " reported ready twice in one step");
    offset += taken;
  }
  launch_complete_buckets();
  for (const CommRequestPtr& request : in_flight_) request->test();  // lets MPI progress them
  step_seconds_ += seconds_since(start);
}

void GradientSync::finish() {
  exposed_seconds_ = 0.0;
  if (!active_) return;
  const auto start = std::chrono::steady_clock::now();
  while (launched_ < buckets_.size()) launch(buckets_[launched_++]);
  for (const CommRequestPtr& request : in_flight_) request->wait();
  in_flight_.clear();
  launched_ = 0;
  std::fill(ready_.begin(), ready_.end(), 0);
  exposed_seconds_ = step_seconds_ + seconds_since(start);
  step_seconds_ = 0.0;
}

void GradientSync::launch_complete_buckets() {
  while (launched_ < buckets_.size() && ready_[launched_] == buckets_[launched_].size) launch(buckets_[launched_++]);
}

void GradientSync::launch(const Bucket& bucket) {
  // The communication reads the gradients directly: backward's kernels must be done (NCCL orders
  // itself after them on the device).
  Comm& group = group_of(bucket);
  if (!group.ordered_on_device()) wait_for_device("data-parallel bucket");
  float* grads = params_.grads.data() + bucket.offset;
  if (!zero1_) {
    in_flight_.push_back(group.all_reduce_sum_async(grads, bucket.size));
    return;
  }
  float* shard = shard_grads_.data() + bucket.shard_offset;
  if (!bucket.padded(bucket.ranks)) {
    in_flight_.push_back(group.reduce_scatter_sum_async(grads, shard, bucket.piece));
    return;
  }
  // Reduce-scatter needs equal pieces: the bucket goes through the padded copy, zeros after its end,
  // which the next padded bucket (each region's first may be one) reuses once this one is done.
  copy_floats(padded_grads_.data(), grads, bucket.size);
  zero_floats(padded_grads_.data() + bucket.size, bucket.piece * bucket.ranks - bucket.size);
  group.reduce_scatter_sum(padded_grads_.data(), shard, bucket.piece);
}

void GradientSync::all_gather_params() {
  const auto start = std::chrono::steady_clock::now();
  all_gather_in_place(params_.values);
  exposed_seconds_ += seconds_since(start);
}

void GradientSync::all_gather_in_place(FloatBuffer& buffer) {
  if (!zero1_ || dp_.size() == 1) return;
  // The optimizer's kernels wrote the pieces being sent (NCCL orders itself after them).
  if (!dp_.ordered_on_device() || (expert_dp_ && !expert_dp_->ordered_on_device()))
    wait_for_device("ZeRO-1 all-gather");
  for (const Bucket& bucket : buckets_) {
    Comm& group = group_of(bucket);
    const std::size_t rank = static_cast<std::size_t>(group.rank());
    float* values = buffer.data() + bucket.offset;
    if (bucket.padded(bucket.ranks)) {  // gathering in place would write past the bucket's end
      copy_floats(padded_values_.data(), values, bucket.size);
      group.all_gather(padded_values_.data() + rank * bucket.piece, padded_values_.data(), bucket.piece);
      copy_floats(values, padded_values_.data(), bucket.size);
    } else {
      group.all_gather(values + rank * bucket.piece, values, bucket.piece);
    }
  }
}

const float* GradientSync::reduced_grads() const {
  return zero1_ ? shard_grads_.data() : params_.grads.data();
}

}  // namespace trident
