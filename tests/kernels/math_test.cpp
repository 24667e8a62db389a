#include "kernels/math.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace trident {
namespace {

TEST(FastExp, WithinTwoUlpOfExpAcrossTheFloatRange) {
  double worst = 0.0;
  for (float x = -87.0f; x < 88.0f; x += 0.001f) {
    const double exact = std::exp(double(x));
    worst = std::max(worst, std::abs(math::fast_exp(x) - exact) / exact);
  }
  EXPECT_LT(worst, 2.5e-7);  // 2 ulp of a float is 2.4e-7 relative
}

TEST(FastExp, ClampsInsteadOfOverflowing) {
  EXPECT_EQ(math::fast_exp(0.0f), 1.0f);
  EXPECT_GT(math::fast_exp(-1000.0f), 0.0f);
  EXPECT_LT(math::fast_exp(-1000.0f), 1.3e-38f);
  EXPECT_TRUE(std::isfinite(math::fast_exp(1000.0f)));
  EXPECT_GT(math::fast_exp(1000.0f), 1e38f);
}

}  // namespace
}  // namespace trident
