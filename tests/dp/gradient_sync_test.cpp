// GradientSync over the world as the dp group: exact sums, buckets launched during "backward",
// ZeRO-1 pieces, and a group of one costing nothing.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "comm/mpi_comm.hpp"
#include "dp/gradient_sync.hpp"
#include "dp_test_support.hpp"

namespace trident {
namespace {

using namespace dp_test;

constexpr std::size_t kFloat = sizeof(float);
// Bucket lengths in elements: single elements, lengths that cut tensors, a tensor's length, one
// element short of the buffer, the whole buffer and more.
const std::vector<std::size_t> kBucketElements = {1, 3, 7, 16, 44, 139, 140, 1000};

// Checks that each range sync holds has the summed gradients; returns how many elements it holds.
std::size_t expect_holds_sums(const GradientSync& sync, const std::vector<float>& sum) {
  const std::vector<float> held = host_copy(sync.reduced_grads(), sync.shard_size());
  std::size_t count = 0, wrong = 0;
  for (const HeldRange& range : sync.held_ranges()) {
    for (std::size_t i = 0; i < range.count; ++i) wrong += held[range.local + i] != sum[range.offset + i];
    count += range.count;
  }
  EXPECT_EQ(wrong, 0u) << "held elements that are not the sum over ranks";
  return count;
}

TEST(GradientSync, AllReduceSumsEveryRanksGradientsForAnyBucketsAndReportOrder) {
  auto dp = make_mpi_comm(MPI_COMM_WORLD);
  for (std::size_t elements : kBucketElements) {
    ParamStore params = one_block_store();
    const std::size_t n = params.total_size();
    from_host(params.grads, rank_gradients(dp->rank(), n, 1));
    GradientSync sync(params, *dp, elements * kFloat, /*zero1=*/false);
    for (const auto& [offset, count] : shuffled_chunks(n, 17u * static_cast<unsigned>(elements) + dp->rank()))
      sync.on_grads_ready(offset, count);
    EXPECT_EQ(sync.launched_buckets(), sync.buckets().size()) << "every bucket was complete before finish()";
    sync.finish();
    EXPECT_EQ(to_host(params.grads), summed_gradients(dp->size(), n, 1)) << "buckets of " << elements;
    EXPECT_EQ(sync.held_ranges().size(), 1u);
    EXPECT_EQ(sync.reduced_grads(), params.grads.data());
  }
}

TEST(GradientSync, FinishAloneReducesWhatWasNeverReported) {
  auto dp = make_mpi_comm(MPI_COMM_WORLD);
  ParamStore params = one_block_store();
  const std::size_t n = params.total_size();
  from_host(params.grads, rank_gradients(dp->rank(), n, 2));
  GradientSync sync(params, *dp, 16 * kFloat, false);
  sync.finish();
  EXPECT_EQ(to_host(params.grads), summed_gradients(dp->size(), n, 2));
}

TEST(GradientSync, ReusableStepAfterStep) {
  auto dp = make_mpi_comm(MPI_COMM_WORLD);
  ParamStore params = one_block_store();
  const std::size_t n = params.total_size();
  GradientSync sync(params, *dp, 7 * kFloat, false);
  for (int step = 1; step <= 3; ++step) {
    from_host(params.grads, rank_gradients(dp->rank(), n, step));
    sync.on_grads_ready(0, n);
    sync.finish();
    EXPECT_EQ(sync.launched_buckets(), 0u);
    EXPECT_GT(sync.last_exposed_seconds(), 0.0);
    EXPECT_EQ(to_host(params.grads), summed_gradients(dp->size(), n, step)) << "step " << step;
  }
}

// Backward reports the end of the buffer first: each bucket must be launched as soon as it is
// complete, long before finish().
TEST(GradientSync, LaunchesEachBucketAsSoonAsItIsComplete) {
  auto dp = make_mpi_comm(MPI_COMM_WORLD);
  for (bool zero1 : {false, true}) {
    ParamStore params = one_block_store();
    const std::size_t n = params.total_size();
    from_host(params.grads, rank_gradients(dp->rank(), n, 3));
    GradientSync sync(params, *dp, 16 * kFloat, zero1);
    const std::vector<Bucket>& buckets = sync.buckets();
    ASSERT_GE(buckets.size(), 5u);
    // ln_f-like tail first: exactly bucket 0 completes.
    sync.on_grads_ready(buckets[0].offset, buckets[0].size);
    EXPECT_EQ(sync.launched_buckets(), 1u);
    // All of bucket 1 and half of bucket 2: bucket 2 waits.
    const std::size_t half = buckets[2].size / 2;
    sync.on_grads_ready(buckets[2].offset + buckets[2].size - half, half + buckets[1].size);
    EXPECT_EQ(sync.launched_buckets(), 2u);
    // Everything but the first element: all buckets except the one holding element 0.
    sync.on_grads_ready(1, buckets[2].offset + buckets[2].size - half - 1);
    EXPECT_EQ(sync.launched_buckets(), buckets.size() - 1);
    sync.on_grads_ready(0, 1);
    EXPECT_EQ(sync.launched_buckets(), buckets.size());
    sync.finish();
    if (zero1) {
      expect_holds_sums(sync, summed_gradients(dp->size(), n, 3));
    } else {
      EXPECT_EQ(to_host(params.grads), summed_gradients(dp->size(), n, 3));
    }
  }
}

// Collectives must start in the same order on every rank: a bucket completed early waits for
// the buckets before it.
TEST(GradientSync, LaunchesInBucketOrderWhateverTheReportOrder) {
  auto dp = make_mpi_comm(MPI_COMM_WORLD);
  ParamStore params = one_block_store();
  GradientSync sync(params, *dp, 16 * kFloat, false);
  const Bucket second = sync.buckets()[1];
  const Bucket first = sync.buckets()[0];
  sync.on_grads_ready(second.offset, second.size);
  EXPECT_EQ(sync.launched_buckets(), 0u);
  sync.on_grads_ready(first.offset, first.size);
  EXPECT_EQ(sync.launched_buckets(), 2u);
  sync.finish();
}

TEST(GradientSync, RejectsReportsOutsideTheBufferOrTwiceInOneStep) {
  auto dp = make_mpi_comm(MPI_COMM_WORLD);
  ParamStore params = one_block_store();
  const std::size_t n = params.total_size();
  GradientSync sync(params, *dp, 16 * kFloat, false);
  EXPECT_THROW(sync.on_grads_ready(n - 1, 2), std::logic_error);
  sync.on_grads_ready(0, n);
  EXPECT_THROW(sync.on_grads_ready(0, n), std::logic_error);
  sync.finish();
}

TEST(GradientSync, HookForwardsToOnGradsReady) {
  auto dp = make_mpi_comm(MPI_COMM_WORLD);
  ParamStore params = one_block_store();
  GradientSync sync(params, *dp, 16 * kFloat, false);
  const GradientSync::ReadyFn hook = sync.hook();
  ASSERT_TRUE(static_cast<bool>(hook));
  hook(sync.buckets()[0].offset, sync.buckets()[0].size);
  EXPECT_EQ(sync.launched_buckets(), 1u);
  sync.finish();
}

// Under ZeRO-1 a rank holds exactly its pieces, each the sum over ranks; together they cover the
// buffer once (checked without trusting plan_buckets by summing the held counts over the ranks).
TEST(GradientSync, ZeroOneHoldsTheSumOfItsPiecesOnly) {
  auto dp = make_mpi_comm(MPI_COMM_WORLD);
  for (std::size_t elements : kBucketElements) {
    ParamStore params = one_block_store();
    const std::size_t n = params.total_size();
    from_host(params.grads, rank_gradients(dp->rank(), n, 4));
    const std::vector<float> before = to_host(params.grads);
    GradientSync sync(params, *dp, elements * kFloat, /*zero1=*/true);
    for (const auto& [offset, count] : shuffled_chunks(n, 5u * static_cast<unsigned>(elements) + dp->rank()))
      sync.on_grads_ready(offset, count);
    sync.finish();

    const std::size_t held = expect_holds_sums(sync, summed_gradients(dp->size(), n, 4));
    EXPECT_LE(held, (n + dp->size() - 1) / dp->size() + sync.buckets().size());
    EXPECT_EQ(dp->all_reduce_sum(static_cast<double>(held)), static_cast<double>(n)) << "buckets of " << elements;
    EXPECT_EQ(to_host(params.grads), before) << "reduce-scatter must leave the local gradients alone";
  }
}

TEST(GradientSync, GroupOfOneCostsNothing) {
  auto alone = make_local_comm();
  ParamStore params = one_block_store();
  const std::size_t n = params.total_size();
  from_host(params.grads, rank_gradients(3, n, 5));
  GradientSync sync(params, *alone, 16 * kFloat, false);
  EXPECT_FALSE(static_cast<bool>(sync.hook())) << "backward should not even call back";
  sync.on_grads_ready(0, n);
  EXPECT_EQ(sync.launched_buckets(), 0u);
  sync.finish();
  EXPECT_EQ(sync.last_exposed_seconds(), 0.0);
  EXPECT_EQ(to_host(params.grads), rank_gradients(3, n, 5));
}

TEST(GradientSync, ZeroOneInAGroupOfOneHoldsEverything) {
  auto alone = make_local_comm();
  ParamStore params = one_block_store();
  const std::size_t n = params.total_size();
  from_host(params.grads, rank_gradients(0, n, 6));  // rank 0 of a group of one
  GradientSync sync(params, *alone, 16 * kFloat, true);
  sync.finish();
  EXPECT_EQ(sync.shard_size(), n);
  EXPECT_EQ(expect_holds_sums(sync, summed_gradients(1, n, 6)), n);
}

}  // namespace
}  // namespace trident
