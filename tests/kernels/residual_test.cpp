#include "kernels/residual.hpp"

#include <gtest/gtest.h>

#include "gradient_check.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int n = 50;

TEST(Residual, ForwardAdds) {
  const FloatBuffer a = random_buffer(n, 1), b = random_buffer(n, 2), out("out", n);
  residual_forward(out.data(), a.data(), b.data(), n);
  const auto ha = to_host(a), hb = to_host(b), hout = to_host(out);
  for (int i = 0; i < n; ++i) EXPECT_EQ(hout[i], ha[i] + hb[i]);
}

// The backward pass hands the output gradient to both inputs unchanged.
TEST(Residual, GradientOfEachInputIsTheOutputGradient) {
  const FloatBuffer a = random_buffer(n, 1), b = random_buffer(n, 2), out("out", n), proj = random_buffer(n, 3);
  auto objective = [&] {
    residual_forward(out.data(), a.data(), b.data(), n);
    return dot(proj, out);
  };
  expect_gradient("a", a, to_host(proj), objective, 1e-2f);
  expect_gradient("b", b, to_host(proj), objective, 1e-2f);
}

}  // namespace
}  // namespace trident
