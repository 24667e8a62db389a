// The GPU's two-pass cross-entropy (gpu/cross_entropy.cu) against its reference, the Kokkos kernel
// of the CPU build (kernels/cross_entropy.hpp), on random logits spread wide enough for a peaked
// softmax: GPT-2's and Llama 3's vocabularies, fewer rows than a block's warps, a target outside the
// vocabulary (its row's loss NaN, the others' untouched), and two launches in a row (the last block
// resets the count the next launch starts from). Skipped without a GPU.
#include "gpu/cross_entropy.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "compare.hpp"
#include "device_vector.hpp"
#include "gpu_available.hpp"
#include "kernels/cross_entropy.hpp"
#include "random_values.hpp"

namespace trident {
namespace {

struct Case {
  int rows, V;
  std::vector<float> logits;
  std::vector<int> targets;

  Case(int rows_, int V_) : rows(rows_), V(V_), logits(random_values(static_cast<std::size_t>(rows_) * V_, 31, 8.0f)) {
    for (int r = 0; r < rows; ++r) targets.push_back(static_cast<int>((r * 7919L + 13) % V));
  }
};

struct Outcome {
  std::vector<float> gradients, losses;
  double loss_sum;
};

Outcome kokkos_reference(const Case& c) {
  Outcome o{c.logits, std::vector<float>(c.rows), 0.0};
  softmax_cross_entropy(o.gradients.data(), o.losses.data(), c.targets.data(), c.rows, c.V, &o.loss_sum);
  return o;
}

// `launches` launches, each on a fresh copy of the logits (the kernel overwrites them).
Outcome fused(const Case& c, int launches = 1) {
  DeviceVector<int> targets(c.targets);
  DeviceVector<double> loss_sum(std::vector<double>{std::nan("")});
  Outcome o;
  for (int i = 0; i < launches; ++i) {
    DeviceVector<float> logits(c.logits), losses(poisoned(c.rows));
    EXPECT_TRUE(cross_entropy_supports(logits.data, c.V));
    cross_entropy(logits.data, losses.data, targets.data, c.rows, c.V, loss_sum.data, nullptr);
    TRIDENT_GPU_CHECK(cudaDeviceSynchronize());
    o = {logits.to_host(), losses.to_host(), loss_sum.to_host()[0]};
  }
  return o;
}

// The same sums and exponentials in another order: float rounding only.
void expect_fused_matches_kokkos(const Case& c, int launches = 1) {
  const Outcome want = kokkos_reference(c), got = fused(c, launches);
  EXPECT_LT(relative_error(got.gradients, want.gradients), 1e-5);
  EXPECT_LT(relative_error(got.losses, want.losses), 1e-5);
  EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-5 * std::abs(want.loss_sum));
}

TEST(CrossEntropy, MatchesTheKokkosKernelOverGpt2sVocabulary) {
  TRIDENT_SKIP_WITHOUT_GPU();
  expect_fused_matches_kokkos(Case(37, 50304));
}

TEST(CrossEntropy, MatchesTheKokkosKernelOverLlama3sVocabulary) {
  TRIDENT_SKIP_WITHOUT_GPU();
  expect_fused_matches_kokkos(Case(9, 128256));
}

TEST(CrossEntropy, MatchesTheKokkosKernelOnManyShortRowsAndOnFewerRowsThanWarps) {
  TRIDENT_SKIP_WITHOUT_GPU();
  expect_fused_matches_kokkos(Case(20000, 64));
  expect_fused_matches_kokkos(Case(3, 260));
}

TEST(CrossEntropy, ASecondLaunchStartsFromTheCountTheFirstReset) {
  TRIDENT_SKIP_WITHOUT_GPU();
  expect_fused_matches_kokkos(Case(3000, 128), 2);
}

TEST(CrossEntropy, ATargetOutsideTheVocabularyMakesOnlyItsRowsLossNaN) {
  TRIDENT_SKIP_WITHOUT_GPU();
  Case c(5, 256);
  c.targets[2] = 256;
  const Outcome want = kokkos_reference(c), got = fused(c);
  EXPECT_LT(relative_error(got.gradients, want.gradients), 1e-5);  // its row: the softmax, no target taken
  for (int r = 0; r < c.rows; ++r) {
    EXPECT_EQ(std::isnan(got.losses[r]), r == 2) << "row " << r;
    if (r != 2) {
      EXPECT_NEAR(got.losses[r], want.losses[r], 1e-5 * std::abs(want.losses[r]));
    }
  }
  EXPECT_TRUE(std::isnan(got.loss_sum));
}

TEST(CrossEntropy, TakesOnlyRows16BytesApart) {
  alignas(16) static float logits[8];
  EXPECT_TRUE(cross_entropy_supports(logits, 50304));
  EXPECT_FALSE(cross_entropy_supports(logits, 50257));  // GPT-2's own vocabulary, unpadded
  EXPECT_FALSE(cross_entropy_supports(logits + 1, 64));
}

}  // namespace
}  // namespace trident
