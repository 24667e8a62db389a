#include "kernels/layernorm.hpp"

#include <gtest/gtest.h>

#include "gradient_check.hpp"
#include "kernels/column_sums.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int rows = 6, C = kColumnBlock + 14;  // a full column block and a partial one

struct LayerNormCase {
  FloatBuffer x = random_buffer(rows * C, 1, 2.0f, 0.5f);  // non-zero mean and non-unit spread
  FloatBuffer weight = random_buffer(C, 2, 0.3f, 1.0f);
  FloatBuffer bias = random_buffer(C, 3);
  FloatBuffer out{"out", rows * C}, mean{"mean", rows}, rstd{"rstd", rows};
  void forward() { layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), weight.data(), bias.data(), rows, C); }
};

TEST(LayerNorm, ForwardMatchesReference) {
  LayerNormCase n;
  n.forward();
  const auto x = to_host(n.x), w = to_host(n.weight), b = to_host(n.bias), out = to_host(n.out);
  const auto mean = to_host(n.mean), rstd = to_host(n.rstd);
  for (int r = 0; r < rows; ++r) {
    double m = 0.0, var = 0.0;
    for (int c = 0; c < C; ++c) m += x[r * C + c] / double(C);
    for (int c = 0; c < C; ++c) var += (x[r * C + c] - m) * (x[r * C + c] - m) / C;
    const double s = 1.0 / std::sqrt(var + 1e-5);
    EXPECT_NEAR(mean[r], m, 1e-5);
    EXPECT_NEAR(rstd[r], s, 1e-5 * s);
    for (int c = 0; c < C; ++c) EXPECT_NEAR(out[r * C + c], (x[r * C + c] - m) * s * w[c] + b[c], 1e-5);
  }
}

// Stored for products in bf16 (train.precision = "bf16"): the fp32 output rounded, the same statistics.
TEST(LayerNorm, Bf16OutputIsTheFp32OutputRounded) {
  LayerNormCase n;
  n.forward();
  const Bf16Buffer out16("out16", rows * C);
  const FloatBuffer mean("mean16", rows), rstd("rstd16", rows);
  layernorm_forward(ProductInput::of_bf16(out16.data()), mean.data(), rstd.data(), n.x.data(), n.weight.data(),
                    n.bias.data(), rows, C);
  expect_bf16_of(out16, n.out);
  EXPECT_EQ(to_host(mean), to_host(n.mean));
  EXPECT_EQ(to_host(rstd), to_host(n.rstd));
}

TEST(LayerNorm, BackwardAccumulatesFiniteDifferenceGradients) {
  LayerNormCase n;
  const FloatBuffer proj = random_buffer(rows * C, 4);
  auto objective = [&] {
    n.forward();
    return dot(proj, n.out);
  };
  n.forward();
  const FloatBuffer dx = random_buffer(rows * C, 5), dweight = random_buffer(C, 6), dbias = random_buffer(C, 7);
  const auto dx_before = to_host(dx), dweight_before = to_host(dweight), dbias_before = to_host(dbias);
  const ColumnSumBuffers sums(2, C);
  layernorm_backward(dx.data(), dweight.data(), dbias.data(), proj.data(), n.x.data(), n.mean.data(), n.rstd.data(),
                     n.weight.data(), rows, C, sums.scratch());
  expect_gradient("x", n.x, difference(to_host(dx), dx_before), objective, 1e-2f);
  expect_gradient("weight", n.weight, difference(to_host(dweight), dweight_before), objective, 1e-2f);
  expect_gradient("bias", n.bias, difference(to_host(dbias), dbias_before), objective, 1e-2f);
}

// The weight and bias gradients are summed per team of rows in the scratch and added once; a second
// launch on the same scratch (its count of finished teams back at 0) adds the same sums again.
TEST(LayerNorm, BackwardAddsTheSameSumsOnEveryLaunch) {
  constexpr int many = 1000;  // more rows than teams on any build
  const FloatBuffer x = random_buffer(many * C, 1, 2.0f, 0.5f), weight = random_buffer(C, 2), bias = random_buffer(C, 3);
  const FloatBuffer out("out", many * C), mean("mean", many), rstd("rstd", many), dout = random_buffer(many * C, 4);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), weight.data(), bias.data(), many, C);
  const FloatBuffer dx("dx", many * C), dweight("dweight", C), dbias("dbias", C);
  const ColumnSumBuffers sums(2, C);
  auto backward = [&] {
    layernorm_backward(dx.data(), dweight.data(), dbias.data(), dout.data(), x.data(), mean.data(), rstd.data(),
                       weight.data(), many, C, sums.scratch());
  };
  backward();
  const auto once_w = to_host(dweight), once_b = to_host(dbias);
  const auto h_x = to_host(x), h_dout = to_host(dout), h_mean = to_host(mean), h_rstd = to_host(rstd);
  for (int c = 0; c < C; c += 37) {
    double w = 0.0, b = 0.0;
    for (int r = 0; r < many; ++r) {
      w += (h_x[r * C + c] - h_mean[r]) * h_rstd[r] * h_dout[r * C + c];
      b += h_dout[r * C + c];
    }
    EXPECT_NEAR(once_w[c], w, 1e-4 * (1.0 + std::abs(w))) << c;
    EXPECT_NEAR(once_b[c], b, 1e-4 * (1.0 + std::abs(b))) << c;
  }
  backward();
  const auto twice_w = to_host(dweight), twice_b = to_host(dbias);
  for (int c = 0; c < C; ++c) {
    ASSERT_EQ(twice_w[c], once_w[c] + once_w[c]) << c;  // x + x is exact
    ASSERT_EQ(twice_b[c], once_b[c] + once_b[c]) << c;
  }
}

}  // namespace
}  // namespace trident
