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
  if (bucket_elements == 0 || dp < 1)
    throw std::invalid_argument("plan_buckets: bucket of " + std::to_string(bucket_elements) + " elements over " +
                                std::to_string(dp) + " data-parallel ranks");
  const std::size_t ranks = static_cast<std::size_t>(dp);
  const std::size_t length = (bucket_elements + ranks - 1) / ranks * ranks;
  std::vector<Bucket> buckets;
  std::size_t shard_offset = 0;
  for (std::size_t end = total; end > 0;) {
    Bucket bucket;
    bucket.offset = end > length ? end - length : 0;
    bucket.size = end - bucket.offset;
    bucket.piece = (bucket.size + ranks - 1) / ranks;
    bucket.shard_offset = shard_offset;
    shard_offset += bucket.piece;
    buckets.push_back(bucket);
    end = bucket.offset;
  }
  return buckets;
}

std::size_t shard_size(const std::vector<Bucket>& buckets) {
  return buckets.empty() ? 0 : buckets.back().shard_offset + buckets.back().piece;
}

std::size_t bucket_elements(double bucket_mb) {
  return std::max<std::size_t>(1, static_cast<std::size_t>(bucket_mb * (1 << 20)) / sizeof(float));
}

std::size_t zero1_gradient_floats(const std::vector<Bucket>& buckets, int dp) {
  const bool padded = !buckets.empty() && buckets.back().padded(dp);
  return shard_size(buckets) + (padded ? 2 * buckets.back().piece * static_cast<std::size_t>(dp) : 0);
}

}  // namespace trident
