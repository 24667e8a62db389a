#include "plan/buckets.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace trident {

HeldRange Bucket::owned_by(int rank) const {
  const std::size_t begin = std::min(size, static_cast<std::size_t>(rank) * piece);
  const std::size_t end = std::min(size, begin + piece);
  return {offset + begin, end - begin, shard_offset};
}

std::vector<Bucket> plan_buckets(std::size_t total, std::size_t bucket_elements, int dp) {
  return plan_buckets(std::vector<BucketRegion>{{0, total, dp, false}}, bucket_elements);
}

std::vector<Bucket> plan_buckets(const std::vector<BucketRegion>& regions, std::size_t bucket_elements) {
  std::vector<Bucket> buckets;
  std::size_t shard_offset = 0;
  for (auto region = regions.rbegin(); region != regions.rend(); ++region) {
    if (bucket_elements == 0 || region->ranks < 1)
      throw std::invalid_argument("plan_buckets: bucket of " + std::to_string(bucket_elements) + " elements over " +
                                  std::to_string(region->ranks) + " data-parallel ranks");
    const std::size_t ranks = static_cast<std::size_t>(region->ranks);
    const std::size_t length = (bucket_elements + ranks - 1) / ranks * ranks;
    for (std::size_t end = region->offset + region->size; end > region->offset;) {
      Bucket bucket;
      bucket.offset = end > region->offset + length ? end - length : region->offset;
      bucket.size = end - bucket.offset;
      bucket.piece = (bucket.size + ranks - 1) / ranks;
      bucket.shard_offset = shard_offset;
      bucket.ranks = region->ranks;
      bucket.experts = region->experts;
      shard_offset += bucket.piece;
      buckets.push_back(bucket);
      end = bucket.offset;
    }
  }
  return buckets;
}

std::size_t shard_size(const std::vector<Bucket>& buckets) {
  return buckets.empty() ? 0 : buckets.back().shard_offset + buckets.back().piece;
}

std::size_t bucket_elements(double bucket_mb) {
  return std::max<std::size_t>(1, static_cast<std::size_t>(bucket_mb * (1 << 20)) / sizeof(float));
}

std::size_t largest_padded_bucket(const std::vector<Bucket>& buckets) {
  std::size_t largest = 0;
  for (const Bucket& bucket : buckets)
    if (bucket.padded(bucket.ranks)) largest = std::max(largest, bucket.piece * static_cast<std::size_t>(bucket.ranks));
  return largest;
}

std::size_t zero1_gradient_floats(const std::vector<Bucket>& buckets) {
  return shard_size(buckets) + 2 * largest_padded_bucket(buckets);
}

}  // namespace trident
