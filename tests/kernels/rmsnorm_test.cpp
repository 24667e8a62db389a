#include "kernels/rmsnorm.hpp"

#include <gtest/gtest.h>

#include "gradient_check.hpp"
#include "kernels/column_sums.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int rows = 6, C = kColumnBlock + 14;  // a full column block and a partial one
constexpr float kEps = 1e-6f;

struct RmsNormCase {
  FloatBuffer x = random_buffer(rows * C, 1, 2.0f, 0.5f);
  FloatBuffer weight = random_buffer(C, 2, 0.3f, 1.0f);
  FloatBuffer out{"out", rows*C}, rstd{"rstd", rows};
  void forward() { rmsnorm_forward(out.data(), rstd.data(), x.data(), weight.data(), kEps, rows, C); }
};

// Hugging Face's LlamaRMSNorm: x · rsqrt(mean(x²) + eps) · weight, no mean subtracted.
TEST(RmsNorm, ForwardMatchesReference) {
  RmsNormCase n;
  n.forward();
  const auto x = to_host(n.x), w = to_host(n.weight), out = to_host(n.out), rstd = to_host(n.rstd);
  for (int r = 0; r < rows; ++r) {
    double squares = 0.0;
    for (int c = 0; c < C; ++c) squares += double(x[r * C + c]) * x[r * C + c];
    const double s = 1.0 / std::sqrt(squares / C + kEps);
    EXPECT_NEAR(rstd[r], s, 1e-5 * s);
    for (int c = 0; c < C; ++c) EXPECT_NEAR(out[r * C + c], x[r * C + c] * s * w[c], 1e-5);
  }
}

// Stored for products in bf16 (train.precision = "bf16"): the fp32 output rounded, the same rstd.
TEST(RmsNorm, Bf16OutputIsTheFp32OutputRounded) {
  RmsNormCase n;
  n.forward();
  const Bf16Buffer out16("out16", rows * C);
  const FloatBuffer rstd("rstd16", rows);
  rmsnorm_forward(ProductInput::of_bf16(out16.data()), rstd.data(), n.x.data(), n.weight.data(), kEps, rows, C);
  expect_bf16_of(out16, n.out);
  EXPECT_EQ(to_host(rstd), to_host(n.rstd));
}

TEST(RmsNorm, BackwardAccumulatesFiniteDifferenceGradients) {
  RmsNormCase n;
  const FloatBuffer proj = random_buffer(rows * C, 4);
  auto objective = [&] {
    n.forward();
    return dot(proj, n.out);
  };
  n.forward();
  const FloatBuffer dx = random_buffer(rows * C, 5), dweight = random_buffer(C, 6);
  const auto dx_before = to_host(dx), dweight_before = to_host(dweight);
  const ColumnSumBuffers sums(1, C);
  rmsnorm_backward(dx.data(), dweight.data(), proj.data(), n.x.data(), n.rstd.data(), n.weight.data(), rows, C,
                   sums.scratch());
  expect_gradient("x", n.x, difference(to_host(dx), dx_before), objective, 1e-2f);
  expect_gradient("weight", n.weight, difference(to_host(dweight), dweight_before), objective, 1e-2f);
}

}  // namespace
}  // namespace trident
