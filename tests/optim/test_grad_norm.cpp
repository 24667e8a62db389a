// Gradient sum of squares, scaling and the clip factor.
#include <gtest/gtest.h>

#include <cmath>

#include "optim/grad_norm.hpp"
#include "param_fixture.hpp"

namespace trident {
namespace {

using optim_test::from_host;
using optim_test::to_host;

TEST(GradNorm, SumOfSquaresCoversEveryTensor) {
  ParamStore params = optim_test::weight_and_bias();
  std::vector<float> grads(params.total_size());
  double expected = 0;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    grads[i] = 0.25f * static_cast<float>(static_cast<int>(i) - 7);  // exact in float
    expected += static_cast<double>(grads[i]) * grads[i];
  }
  from_host(params.grads, grads);
  EXPECT_DOUBLE_EQ(grad_sum_of_squares(params), expected);
}

TEST(GradNorm, SumOfSquaresOfARange) {
  const std::vector<float> data = {100.0f, 1.0f, -2.0f, 3.0f, 100.0f};
  FloatBuffer buffer("data", data.size());
  from_host(buffer, data);
  EXPECT_EQ(sum_of_squares(buffer.data() + 1, 3), 14.0);
  EXPECT_EQ(sum_of_squares(buffer.data(), 0), 0.0);
}

TEST(GradNorm, SumOfSquaresAccumulatesInDouble) {
  ParamStore params;
  params.add("wte.weight", {1 << 12, 1 << 12});  // 16.7M elements: a float sum would stall at 2^24
  params.allocate();
  Kokkos::deep_copy(params.grads, 1.0f);
  EXPECT_EQ(grad_sum_of_squares(params), static_cast<double>(1 << 24));
}

TEST(GradNorm, ClipFactorOnlyShrinksNormsAboveTheLimit) {
  EXPECT_DOUBLE_EQ(clip_factor(4.0, 1.0), 0.25);
  EXPECT_DOUBLE_EQ(clip_factor(1.0, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(clip_factor(0.5, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(clip_factor(1e6, 0.0), 1.0);  // 0 = clipping off
}

}  // namespace
}  // namespace trident
