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

}  // namespace

GradientSync::GradientSync(ParamStore& params, Comm& dp, std::size_t bucket_bytes, bool zero1)
    : params_(params),
      dp_(dp),
      zero1_(zero1),
      active_(zero1 || dp.size() > 1),
      buckets_(plan_buckets(params.total_size(), std::max<std::size_t>(1, bucket_bytes / sizeof(float)), dp.size())),
      ready_(buckets_.size(), 0) {
  if (params.grads.extent(0) != params.total_size())
    throw std::logic_error("GradientSync: the parameter store is not allocated");
  if (!zero1) {
    held_.push_back({0, params.total_size(), 0});
    return;
  }
  shard_grads_ = FloatBuffer("zero1_grads", trident::shard_size(buckets_));
  for (const Bucket& bucket : buckets_) {
    if (const HeldRange owned = bucket.owned_by(dp.rank()); owned.count > 0) held_.push_back(owned);
    if (bucket.padded(dp.size())) {
      padded_grads_ = FloatBuffer("zero1_padded_grads", bucket.piece * dp.size());
      padded_values_ = FloatBuffer("zero1_padded_values", bucket.piece * dp.size());
    }
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
  if (!dp_.ordered_on_device()) wait_for_device("data-parallel bucket");
  float* grads = params_.grads.data() + bucket.offset;
  if (!zero1_) {
    in_flight_.push_back(dp_.all_reduce_sum_async(grads, bucket.size));
    return;
  }
  const float* send = grads;
  if (bucket.padded(dp_.size())) {  // reduce-scatter needs dp equal pieces: pad with zeros
    copy_floats(padded_grads_.data(), grads, bucket.size);
    send = padded_grads_.data();
  }
  in_flight_.push_back(dp_.reduce_scatter_sum_async(send, shard_grads_.data() + bucket.shard_offset, bucket.piece));
}

void GradientSync::all_gather_params() {
  const auto start = std::chrono::steady_clock::now();
  all_gather_in_place(params_.values);
  exposed_seconds_ += seconds_since(start);
}

void GradientSync::all_gather_in_place(FloatBuffer& buffer) {
  if (!zero1_ || dp_.size() == 1) return;
  // The optimizer's kernels wrote the pieces being sent (NCCL orders itself after them).
  if (!dp_.ordered_on_device()) wait_for_device("ZeRO-1 all-gather");
  const std::size_t rank = static_cast<std::size_t>(dp_.rank());
  for (const Bucket& bucket : buckets_) {
    float* values = buffer.data() + bucket.offset;
    if (bucket.padded(dp_.size())) {  // gathering in place would write past the bucket's end
      copy_floats(padded_values_.data(), values, bucket.size);
      dp_.all_gather(padded_values_.data() + rank * bucket.piece, padded_values_.data(), bucket.piece);
      copy_floats(values, padded_values_.data(), bucket.size);
    } else {
      dp_.all_gather(values + rank * bucket.piece, values, bucket.piece);
    }
  }
}

const float* GradientSync::reduced_grads() const {
  return zero1_ ? shard_grads_.data() : params_.grads.data();
}

}  // namespace trident
