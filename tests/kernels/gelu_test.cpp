// GELU (tanh approximation) and the layer it follows: GPT-2's c_fc runs it as its product's
// epilogue (linear_gelu_forward), and the MLP projection's input gradient is taken back through it
// in its own product (linear_backward_input_through_gelu, with c_fc's bias gradient).
#include "kernels/gelu.hpp"

#include <gtest/gtest.h>

#include "gradient_check.hpp"
#include "kernels/linear.hpp"

namespace trident {
namespace {

using namespace testing;

double tanh_gelu(double v) { return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))); }

TEST(Gelu, MatchesTanhFormulaAndItsDerivative) {
  for (double v = -8.0; v <= 8.0; v += 0.0625) {
    EXPECT_NEAR(gelu_math::gelu(static_cast<float>(v)), tanh_gelu(v), 1e-6 * (1.0 + std::abs(v))) << "x = " << v;
    const double h = 1e-4, slope = (tanh_gelu(v + h) - tanh_gelu(v - h)) / (2.0 * h);
    EXPECT_NEAR(gelu_math::gelu_grad(static_cast<float>(v)), slope, 1e-5) << "x = " << v;
  }
}

// h = gelu(x · w1 + b1), out = h · w2, objective = Σ proj ⊙ out.
struct TwoLayers {
  static constexpr int rows = 6, in = 5, hidden = 9, out = 4;
  GemmContext gemm;
  FloatBuffer x = random_buffer(rows * in, 1), w1 = random_buffer(in * hidden, 2), b1 = random_buffer(hidden, 3);
  FloatBuffer w2 = random_buffer(hidden * out, 4), proj = random_buffer(rows * out, 5);
  FloatBuffer z{"z", rows * hidden}, h{"h", rows * hidden}, y{"y", rows * out};
  double objective() {
    linear_gelu_forward(gemm, h.data(), z.data(), x.data(), w1.data(), b1.data(), rows, in, hidden);
    linear_forward(gemm, y.data(), h.data(), w2.data(), nullptr, rows, hidden, out);
    return dot(proj, y);
  }
};

TEST(LinearGelu, ForwardKeepsThePreActivation) {
  TwoLayers t;
  t.objective();
  const FloatBuffer plain("plain", TwoLayers::rows * TwoLayers::hidden);
  linear_forward(t.gemm, plain.data(), t.x.data(), t.w1.data(), t.b1.data(), TwoLayers::rows, TwoLayers::in,
                 TwoLayers::hidden);
  const auto z = to_host(t.z), h = to_host(t.h);
  EXPECT_EQ(z, to_host(plain));
  for (std::size_t i = 0; i < z.size(); ++i) EXPECT_NEAR(h[i], tanh_gelu(z[i]), 1e-6 * (1.0 + std::abs(z[i]))) << i;
}

TEST(LinearGelu, GradientsThroughTheGeluMatchFiniteDifferences) {
  TwoLayers t;
  t.objective();
  constexpr int rows = TwoLayers::rows, in = TwoLayers::in, hidden = TwoLayers::hidden, out = TwoLayers::out;
  const FloatBuffer dz = random_buffer(rows * hidden, 6);  // overwritten
  const FloatBuffer db1 = random_buffer(hidden, 7), dw1("dw1", in * hidden), dx("dx", rows * in);
  const auto db1_before = to_host(db1);
  linear_backward_input_through_gelu(t.gemm, dz.data(), db1.data(), t.proj.data(), t.w2.data(), t.z.data(), rows,
                                     hidden, out);
  linear_backward_weight(t.gemm, dw1.data(), nullptr, t.x.data(), dz.data(), rows, in, hidden);
  linear_backward_input(t.gemm, dx.data(), dz.data(), t.w1.data(), rows, in, hidden);
  auto objective = [&] { return t.objective(); };
  expect_gradient("b1", t.b1, difference(to_host(db1), db1_before), objective, 1e-2f);
  expect_gradient("w1", t.w1, to_host(dw1), objective, 1e-2f);
  expect_gradient("x", t.x, to_host(dx), objective, 1e-2f);
}

// Under bf16 the GELU output can be stored as the products read it: the fp32 output rounded, with
// the same pre-activation kept, and every product that reads it (the next layer's forward, its
// weight gradient) gives the same result as from the fp32 output.
TEST(LinearGelu, Bf16OutputIsTheFp32OutputRoundedForTheSameProducts) {
  constexpr int rows = TwoLayers::rows, in = TwoLayers::in, hidden = TwoLayers::hidden, out = TwoLayers::out;
  TwoLayers t;
  GemmContext bf16(MatmulPrecision::bf16);
  const FloatBuffer h("h", rows * hidden), z("z", rows * hidden), z16("z16", rows * hidden);
  const Bf16Buffer h16("h16", rows * hidden);
  linear_gelu_forward(bf16, h.data(), z.data(), t.x.data(), t.w1.data(), t.b1.data(), rows, in, hidden);
  linear_gelu_forward(bf16, ProductInput::of_bf16(h16.data()), z16.data(), t.x.data(), t.w1.data(), t.b1.data(), rows, in, hidden);
  EXPECT_EQ(to_host(z16), to_host(z));
  expect_bf16_of(h16, h);

  const FloatBuffer y("y", rows * out), y16("y16", rows * out), dw("dw", hidden * out), dw16("dw16", hidden * out);
  linear_forward(bf16, y.data(), h.data(), t.w2.data(), nullptr, rows, hidden, out);
  linear_forward(bf16, y16.data(), Operand::of_bf16(h16.data()), t.w2.data(), nullptr, rows, hidden, out);
  linear_backward_weight(bf16, dw.data(), nullptr, h.data(), t.proj.data(), rows, hidden, out);
  linear_backward_weight(bf16, dw16.data(), nullptr, Operand::of_bf16(h16.data()), t.proj.data(), rows, hidden, out);
  EXPECT_EQ(to_host(y16), to_host(y));
  EXPECT_EQ(to_host(dw16), to_host(dw));
}

}  // namespace
}  // namespace trident
