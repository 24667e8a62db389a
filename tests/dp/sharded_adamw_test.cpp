// ZeRO-1 against plain AdamW: the sharded update followed by the all-gather must give every rank
// exactly the weights of AdamW applied to the summed gradient, step after step.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "comm/mpi_comm.hpp"
#include "dp/sharded_adamw.hpp"
#include "dp_test_support.hpp"
#include "optim/adamw.hpp"

namespace trident {
namespace {

using namespace dp_test;

std::vector<float> initial_values(std::size_t count) {
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = 0.5f - 0.01f * static_cast<float>(i);
  return values;
}

// Whether some rank's piece starts strictly inside a decayed tensor, so that one tensor's decay
// is applied by two ranks.
bool piece_cuts_a_decayed_tensor(const GradientSync& sync, int ranks) {
  for (const Bucket& bucket : sync.buckets())
    for (int rank = 0; rank < ranks; ++rank)
      for (const ParamTensor& tensor : sync.params().tensors()) {
        const std::size_t start = bucket.owned_by(rank).offset;
        if (tensor.weight_decay && start > tensor.offset && start < tensor.offset + tensor.size) return true;
      }
  return false;
}

TEST(ShardedAdamW, EqualsAdamWOnTheSummedGradient) {
  auto dp = make_mpi_comm(MPI_COMM_WORLD);
  TrainConfig train;
  train.weight_decay = 0.5;  // large: decay applied to the wrong elements would show at once
  for (std::size_t elements : {1u, 7u, 16u, 1000u}) {
    ParamStore reference = one_block_store();
    ParamStore params = one_block_store();
    const std::size_t n = params.total_size();
    from_host(reference.values, initial_values(n));
    from_host(params.values, initial_values(n));
    AdamW adamw(reference, train);
    GradientSync sync(params, *dp, elements * sizeof(float), /*zero1=*/true);
    ShardedAdamW zero(sync, train);
    EXPECT_LT(zero.m.extent(0), n) << "optimizer state must be sharded";
    if (elements == 7 || elements == 16) {
      ASSERT_TRUE(piece_cuts_a_decayed_tensor(sync, dp->size()));
    }

    Kokkos::View<double, MemSpace> norm_squared("norm_squared");
    Kokkos::deep_copy(norm_squared, 16.0);  // norm 4
    for (int step = 1; step <= 4; ++step) {
      const double lr = 0.01 * step;
      const GradClip clip{norm_squared.data(), step == 3 ? 1.0 : 0.0};  // step 3 clipped to a quarter
      from_host(reference.grads, summed_gradients(dp->size(), n, step));
      adamw.step(reference, step, lr, clip);

      from_host(params.grads, rank_gradients(dp->rank(), n, step));
      if (const GradientSync::ReadyFn hook = sync.hook(); hook) hook(0, n);
      sync.finish();
      zero.step(params, step, lr, clip);

      EXPECT_EQ(to_host(params.values), to_host(reference.values)) << "step " << step << ", buckets of " << elements;
      const std::vector<float> m = to_host(zero.m), v = to_host(zero.v);
      const std::vector<float> m_reference = to_host(adamw.m), v_reference = to_host(adamw.v);
      std::size_t moment_mismatches = 0;
      for (const HeldRange& range : sync.held_ranges())
        for (std::size_t i = 0; i < range.count; ++i)
          if (m[range.local + i] != m_reference[range.offset + i] || v[range.local + i] != v_reference[range.offset + i])
            ++moment_mismatches;
      EXPECT_EQ(moment_mismatches, 0u) << "step " << step << ", buckets of " << elements;
    }

    // Checkpoints: the exported moments are plain AdamW's whole ones on every rank, and importing
    // them into a fresh sharded optimizer restores exactly its pieces.
    const Optimizer::Moments full = zero.full_moments();
    EXPECT_EQ(to_host(full.m), to_host(adamw.m)) << "buckets of " << elements;
    EXPECT_EQ(to_host(full.v), to_host(adamw.v)) << "buckets of " << elements;
    ShardedAdamW restored(sync, train);
    restored.import_moments(full);
    EXPECT_EQ(to_host(restored.m), to_host(zero.m)) << "buckets of " << elements;
    EXPECT_EQ(to_host(restored.v), to_host(zero.v)) << "buckets of " << elements;
  }
}

TEST(ShardedAdamW, NeedsAZeroOneSyncOfTheSameStore) {
  auto dp = make_mpi_comm(MPI_COMM_WORLD);
  ParamStore params = one_block_store();
  ParamStore other = one_block_store();
  GradientSync plain(params, *dp, 64, /*zero1=*/false);
  EXPECT_THROW(ShardedAdamW(plain, TrainConfig{}), std::logic_error);
  GradientSync sync(params, *dp, 64, /*zero1=*/true);
  ShardedAdamW zero(sync, TrainConfig{});
  EXPECT_THROW(zero.step(other, 1, 0.1), std::logic_error);
}

}  // namespace
}  // namespace trident
