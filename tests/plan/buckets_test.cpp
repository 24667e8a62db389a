// The bucket plan: coverage, reduction order, and the ZeRO-1 pieces partitioning the buffer.
#include "plan/buckets.hpp"

#include <gtest/gtest.h>

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
