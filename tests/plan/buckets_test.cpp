// The bucket plan: coverage, reduction order, and the ZeRO-1 pieces partitioning the buffer.
#include "plan/buckets.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace trident {
namespace {

TEST(Buckets, CoverTheBufferFromItsEndInDecreasingOffsets) {
  const std::vector<Bucket> buckets = plan_buckets(140, 16, 1);
  ASSERT_EQ(buckets.size(), 9u);
  std::size_t end = 140;
  for (const Bucket& bucket : buckets) {
    EXPECT_EQ(bucket.offset + bucket.size, end);
    end = bucket.offset;
  }
  EXPECT_EQ(end, 0u);
  EXPECT_EQ(buckets.front().size, 16u);
  EXPECT_EQ(buckets.back().size, 140u - 8 * 16);  // the remainder sits at the start of the buffer
}

TEST(Buckets, OneBucketWhenTheBucketIsLargerThanTheBuffer) {
  const std::vector<Bucket> buckets = plan_buckets(140, 1000, 3);
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].offset, 0u);
  EXPECT_EQ(buckets[0].size, 140u);
  EXPECT_EQ(buckets[0].piece, 47u);
  EXPECT_TRUE(buckets[0].padded(3));
}

TEST(Buckets, LengthIsRoundedUpToAMultipleOfTheDataParallelSize) {
  const std::vector<Bucket> buckets = plan_buckets(100, 10, 4);
  EXPECT_EQ(buckets[0].size, 12u);
  EXPECT_EQ(buckets[0].piece, 3u);
  EXPECT_FALSE(buckets[0].padded(4));
  EXPECT_EQ(buckets.back().size, 100u % 12);
  EXPECT_EQ(shard_size(buckets), 8 * 3u + 1u);
}

TEST(Buckets, EmptyBufferHasNoBuckets) {
  EXPECT_TRUE(plan_buckets(0, 16, 2).empty());
  EXPECT_EQ(shard_size(plan_buckets(0, 16, 2)), 0u);
}

TEST(Buckets, ZeroElementBucketsAreRejected) { EXPECT_THROW(plan_buckets(10, 0, 2), std::invalid_argument); }

// Every element is owned by exactly one rank, and each rank's pieces are packed in its shard
// without overlap, whatever the sizes (including pieces that are all padding).
TEST(Buckets, PiecesPartitionTheBufferAcrossRanks) {
  for (std::size_t total : {1u, 5u, 140u, 141u}) {
    for (std::size_t length : {1u, 3u, 7u, 16u, 1000u}) {
      for (int dp : {1, 2, 3, 4, 8}) {
        const std::vector<Bucket> buckets = plan_buckets(total, length, dp);
        std::vector<int> owners(total, 0);
        for (int rank = 0; rank < dp; ++rank) {
          std::vector<int> shard_uses(shard_size(buckets), 0);
          for (const Bucket& bucket : buckets) {
            const HeldRange owned = bucket.owned_by(rank);
            ASSERT_LE(owned.count, bucket.piece);
            ASSERT_GE(owned.offset, bucket.offset);
            ASSERT_LE(owned.offset + owned.count, bucket.offset + bucket.size);
            for (std::size_t i = 0; i < owned.count; ++i) {
              ++owners[owned.offset + i];
              ++shard_uses[owned.local + i];
            }
          }
          for (std::size_t j = 0; j < shard_uses.size(); ++j) ASSERT_LE(shard_uses[j], 1) << "shard slot " << j;
        }
        for (std::size_t i = 0; i < total; ++i)
          ASSERT_EQ(owners[i], 1) << "element " << i << " of " << total << ", buckets of " << length << ", dp " << dp;
      }
    }
  }
}

}  // namespace
}  // namespace trident

namespace trident {
namespace {

// Expert parallelism: regions reduced over groups of different sizes. No bucket crosses a region's
// border, buckets still run from the end of the buffer down, each region's are cut for its own
// group (the first of each may be padded), and the shard packs every piece once.
TEST(Buckets, RegionsAreCutOnTheirOwn) {
  const std::vector<BucketRegion> regions = {{0, 10, 4, false}, {10, 13, 2, true}, {23, 9, 4, false}};
  const std::vector<Bucket> buckets = plan_buckets(regions, 4);
  std::size_t end = 32, shard = 0;
  for (const Bucket& bucket : buckets) {
    EXPECT_EQ(bucket.offset + bucket.size, end);  // contiguous, from the end down
    end = bucket.offset;
    const BucketRegion& region = *std::find_if(regions.begin(), regions.end(), [&](const BucketRegion& r) {
      return bucket.offset >= r.offset && bucket.offset < r.offset + r.size;
    });
    EXPECT_LE(bucket.offset + bucket.size, region.offset + region.size) << "crosses a region's end";
    EXPECT_EQ(bucket.ranks, region.ranks);
    EXPECT_EQ(bucket.experts, region.experts);
    EXPECT_EQ(bucket.piece, (bucket.size + region.ranks - 1) / region.ranks);
    EXPECT_EQ(bucket.shard_offset, shard);
    shard += bucket.piece;
  }
  EXPECT_EQ(end, 0u);
  EXPECT_EQ(shard_size(buckets), shard);
  // Region [10, 23) over 2 ranks in buckets of 4: 19-23, 15-19, 11-15, and 10-11 padded to 2.
  EXPECT_EQ(buckets.size(), 3u + 4u + 3u);
  EXPECT_EQ(largest_padded_bucket(buckets), 4u);  // [23, 32)'s 1-element bucket padded to 4 ranks
  EXPECT_EQ(zero1_gradient_floats(buckets), shard + 2 * 4u);
}

}  // namespace
}  // namespace trident
