#include "kernels/linear.hpp"

#include <gtest/gtest.h>

#include "gradient_check.hpp"
#include "kernels/column_sums.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int rows = 5, in = 7, out = kColumnBlock + 14;  // bias gradient: a full column block and a partial one

struct LinearCase {
  GemmContext gemm;
  FloatBuffer x = random_buffer(rows * in, 1), w = random_buffer(in * out, 2), bias = random_buffer(out, 3);
  FloatBuffer y{"y", rows * out};
  void forward() { linear_forward(gemm, y.data(), x.data(), w.data(), bias.data(), rows, in, out); }
};

TEST(Linear, ForwardMatchesReference) {
  LinearCase l;
  l.forward();
  const auto x = to_host(l.x), w = to_host(l.w), b = to_host(l.bias), y = to_host(l.y);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double sum = b[o];
      for (int i = 0; i < in; ++i) sum += double(x[r * in + i]) * w[i * out + o];
      EXPECT_NEAR(y[r * out + o], sum, 1e-5);
    }
}

// A null bias is no bias, whatever the output buffer held before.
TEST(Linear, ForwardWithoutBiasOverwritesOutput) {
  LinearCase with_zero_bias, without_bias;
  Kokkos::deep_copy(with_zero_bias.bias, 0.0f);
  Kokkos::deep_copy(without_bias.y, 1e30f);
  with_zero_bias.forward();
  linear_forward(without_bias.gemm, without_bias.y.data(), without_bias.x.data(), without_bias.w.data(), nullptr, rows,
                 in, out);
  EXPECT_EQ(to_host(without_bias.y), to_host(with_zero_bias.y));
}

TEST(Linear, BackwardMatchesFiniteDifferences) {
  LinearCase l;
  const FloatBuffer proj = random_buffer(rows * out, 4);
  auto objective = [&] {
    l.forward();
    return dot(proj, l.y);
  };
  // dx is overwritten; dw and dbias accumulate.
  const FloatBuffer dx = random_buffer(rows * in, 5), dw = random_buffer(in * out, 6), dbias = random_buffer(out, 7);
  const auto dw_before = to_host(dw), dbias_before = to_host(dbias);
  linear_backward_input(l.gemm, dx.data(), proj.data(), l.w.data(), rows, in, out);
  linear_backward_weight(l.gemm, dw.data(), dbias.data(), l.x.data(), proj.data(), rows, in, out);
  expect_gradient("x", l.x, to_host(dx), objective, 1e-2f);
  expect_gradient("weight", l.w, difference(to_host(dw), dw_before), objective, 1e-2f);
  expect_gradient("bias", l.bias, difference(to_host(dbias), dbias_before), objective, 1e-2f);
}

// nn.Linear's layout [out, in] computes what the Conv1D layout does with the transposed matrix.
TEST(Linear, OutInLayoutIsTheTransposedWeight) {
  LinearCase l;
  const auto w = to_host(l.w);
  std::vector<float> transposed(w.size());
  for (int i = 0; i < in; ++i)
    for (int o = 0; o < out; ++o) transposed[o * in + i] = w[i * out + o];
  FloatBuffer wt("wt", in * out), y("y", rows * out);
  copy_to(wt, transposed);
  l.forward();
  linear_forward(l.gemm, y.data(), l.x.data(), wt.data(), l.bias.data(), rows, in, out, WeightLayout::out_in);
  const auto expected_y = to_host(l.y), got_y = to_host(y);
  for (std::size_t i = 0; i < got_y.size(); ++i) EXPECT_NEAR(got_y[i], expected_y[i], 1e-5);

  const FloatBuffer dy = random_buffer(rows * out, 8);
  FloatBuffer dx("dx", rows * in), dx_t("dx_t", rows * in), dw("dw", in * out), dw_t("dw_t", in * out);
  linear_backward_input(l.gemm, dx.data(), dy.data(), l.w.data(), rows, in, out);
  linear_backward_input(l.gemm, dx_t.data(), dy.data(), wt.data(), rows, in, out, WeightLayout::out_in);
  linear_backward_weight(l.gemm, dw.data(), nullptr, l.x.data(), dy.data(), rows, in, out);
  linear_backward_weight(l.gemm, dw_t.data(), nullptr, l.x.data(), dy.data(), rows, in, out, WeightLayout::out_in);
  const auto a = to_host(dx), b = to_host(dx_t), c = to_host(dw), d = to_host(dw_t);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-5);
  for (int i = 0; i < in; ++i)
    for (int o = 0; o < out; ++o) EXPECT_NEAR(d[o * in + i], c[i * out + o], 1e-5);
}

}  // namespace
}  // namespace trident
