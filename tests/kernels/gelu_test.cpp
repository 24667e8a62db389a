#include "kernels/gelu.hpp"

#include <gtest/gtest.h>

#include "gradient_check.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int n = 300;

TEST(Gelu, ForwardMatchesTanhFormula) {
  const FloatBuffer x = random_buffer(n, 1, 3.0f), out("out", n);
  gelu_forward(out.data(), x.data(), n);
  const auto hx = to_host(x), hout = to_host(out);
  for (int i = 0; i < n; ++i) {
    const double v = hx[i];
    const double reference = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(hout[i], reference, 1e-6 * (1.0 + std::abs(v))) << "x = " << v;
  }
}

TEST(Gelu, BackwardMatchesFiniteDifferences) {
  const FloatBuffer x = random_buffer(n, 1, 3.0f), out("out", n), proj = random_buffer(n, 2);
  auto objective = [&] {
    gelu_forward(out.data(), x.data(), n);
    return dot(proj, out);
  };
  const FloatBuffer dx("dx", n);
  gelu_backward(dx.data(), x.data(), proj.data(), n);
  expect_gradient("x", x, to_host(dx), objective, 1e-3f);
}

TEST(Gelu, BackwardInPlaceOverItsGradient) {
  const FloatBuffer x = random_buffer(n, 1, 3.0f), d = random_buffer(n, 2), dx("dx", n);
  gelu_backward(dx.data(), x.data(), d.data(), n);
  gelu_backward(d.data(), x.data(), d.data(), n);
  EXPECT_EQ(to_host(d), to_host(dx));
}

}  // namespace
}  // namespace trident
