#include "kernels/math.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace trident {
namespace {

TEST(FastExp, WithinTwoUlpOfExpAcrossTheFloatRange) {
  double worst = 0.0;
  for (float x = -86.5f; x < 88.3f; x += 0.001f) {
    const double exact = std::exp(double(x));
    worst = std::max(worst, std::abs(math::fast_exp(x) - exact) / exact);
  }
  EXPECT_LT(worst, 2.5e-7);  // 2 ulp of a float is 2.4e-7 relative
}

// Never a denormal: tiny results flush to 0, huge ones are +inf.
TEST(FastExp, FlushesBelowNormalRangeAndOverflowsToInfinity) {
  EXPECT_EQ(math::fast_exp(0.0f), 1.0f);
  for (float x = -120.0f; x < -80.0f; x += 0.01f) {
    const float e = math::fast_exp(x);
    ASSERT_TRUE(e == 0.0f || std::isnormal(e)) << "x = " << x;
  }
  EXPECT_EQ(math::fast_exp(-1000.0f), 0.0f);
  EXPECT_EQ(math::fast_exp(1000.0f), std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace trident
