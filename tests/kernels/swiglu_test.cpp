#include "kernels/swiglu.hpp"

#include <gtest/gtest.h>

#include "gradient_check.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr long n = 37;

struct SwigluCase {
  FloatBuffer gate = random_buffer(n, 1, 3.0f), up = random_buffer(n, 2);
  FloatBuffer h{"h", n};
  void forward() { swiglu_forward(h.data(), gate.data(), up.data(), n); }
};

TEST(Swiglu, ForwardIsSiluOfGateTimesUp) {
  SwigluCase s;
  s.forward();
  const auto g = to_host(s.gate), u = to_host(s.up), h = to_host(s.h);
  for (long i = 0; i < n; ++i) {
    const double silu = g[i] / (1.0 + std::exp(-double(g[i])));
    EXPECT_NEAR(h[i], silu * u[i], 1e-5 * (1.0 + std::abs(silu * u[i])));
  }
}

TEST(Swiglu, BackwardMatchesFiniteDifferences) {
  SwigluCase s;
  const FloatBuffer proj = random_buffer(n, 3);
  auto objective = [&] {
    s.forward();
    return dot(proj, s.h);
  };
  const FloatBuffer dgate = random_buffer(n, 4), dup = random_buffer(n, 5);  // overwritten
  swiglu_backward(dgate.data(), dup.data(), proj.data(), s.gate.data(), s.up.data(), n);
  expect_gradient("gate", s.gate, to_host(dgate), objective, 1e-2f);
  expect_gradient("up", s.up, to_host(dup), objective, 1e-2f);
}

}  // namespace
}  // namespace trident
