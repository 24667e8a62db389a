#include "kernels/cross_entropy.hpp"

#include <gtest/gtest.h>

#include "gradient_check.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int rows = 6, V = 70;
const std::vector<int> kTargets = {0, 69, 5, 5, 33, 12};

TEST(SoftmaxCrossEntropy, LossesMatchReferenceAndSum) {
  const FloatBuffer logits = random_buffer(rows * V, 1, 3.0f), losses("losses", rows);
  const auto x = to_host(logits);
  const double total = softmax_cross_entropy(logits.data(), losses.data(), int_buffer(kTargets).data(), rows, V);
  const auto hl = to_host(losses);
  double reference_total = 0.0;
  for (int r = 0; r < rows; ++r) {
    double max = -1e300, sum = 0.0;
    for (int v = 0; v < V; ++v) max = std::max(max, double(x[r * V + v]));
    for (int v = 0; v < V; ++v) sum += std::exp(x[r * V + v] - max);
    const double loss = std::log(sum) + max - x[r * V + kTargets[r]];
    EXPECT_NEAR(hl[r], loss, 1e-5 * loss);
    reference_total += loss;
  }
  EXPECT_NEAR(total, reference_total, 1e-5 * reference_total);
}

TEST(SoftmaxCrossEntropy, LogitsBecomeGradientOfLossSum) {
  const FloatBuffer logits = random_buffer(rows * V, 1, 3.0f), work("work", rows * V), losses("losses", rows);
  const IntBuffer targets = int_buffer(kTargets);
  auto objective = [&] {
    Kokkos::deep_copy(work, logits);
    return softmax_cross_entropy(work.data(), losses.data(), targets.data(), rows, V);
  };
  objective();
  expect_gradient("logits", logits, to_host(work), objective, 1e-2f);
}

}  // namespace
}  // namespace trident
