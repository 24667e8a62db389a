#include "kernels/rope.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "gradient_check.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int B = 2, T = 5, heads = 3, hd = 8;
constexpr long ld = heads * hd + 4;  // rows padded: the padding is neither read nor written
constexpr double kTheta = 10000.0;

// Hugging Face's apply_rotary_pos_emb with rotate_half, written out per element in double:
// out = x·cos + rotate_half(x)·sin, rotate_half(x) = (−x₂, x₁), angle t · theta^(−2i/hd).
double reference(const std::vector<float>& x, int b, int t, int h, int d) {
  const int pairs = hd / 2, i = d % pairs;
  const double angle = t * std::pow(kTheta, -2.0 * i / hd);
  const long row = (static_cast<long>(b) * T + t) * ld + h * hd;
  const double rotated = d < pairs ? -x[row + d + pairs] : x[row + d - pairs];
  return x[row + d] * std::cos(angle) + rotated * std::sin(angle);
}

TEST(Rope, RotatesPairsAsHuggingFaceDoesAndLeavesPaddingAlone) {
  const RopeTable table(T, hd, kTheta);
  const FloatBuffer x = random_buffer(B * T * ld, 1);
  const auto before = to_host(x);
  rope_rotate(x.data(), table, B, T, heads, ld, +1);
  const auto after = to_host(x);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const long row = (static_cast<long>(b) * T + t) * ld;
      for (int h = 0; h < heads; ++h)
        for (int d = 0; d < hd; ++d) EXPECT_NEAR(after[row + h * hd + d], reference(before, b, t, h, d), 1e-5);
      for (long pad = heads * hd; pad < ld; ++pad) EXPECT_EQ(after[row + pad], before[row + pad]);
    }
}

// Backward is the transpose: <rope(x), y> = <x, rope⁻¹(y)>, and a rotation's transpose is its inverse.
TEST(Rope, BackwardIsTheTransposeAndUndoesTheRotation) {
  const RopeTable table(T, hd, kTheta);
  const FloatBuffer x = random_buffer(B * T * ld, 2), y = random_buffer(B * T * ld, 3);
  const double x_dot_y = dot(x, y);
  const auto y_before = to_host(y);
  rope_rotate(x.data(), table, B, T, heads, ld, +1);
  rope_rotate(y.data(), table, B, T, heads, ld, +1);
  EXPECT_NEAR(dot(x, y), x_dot_y, 1e-4 * std::abs(x_dot_y) + 1e-4);  // a rotation keeps inner products
  rope_rotate(y.data(), table, B, T, heads, ld, -1);
  const auto y_after = to_host(y);
  for (std::size_t i = 0; i < y_after.size(); ++i) EXPECT_NEAR(y_after[i], y_before[i], 1e-5);
}

}  // namespace
}  // namespace trident
