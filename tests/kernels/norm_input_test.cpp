// A norm of a residual sum (kernels/norm_input.hpp): the norm's kernel adds a + b as it reads the
// row and writes the sum out; the result is bit for bit the separate add followed by the norm, for
// LayerNorm and RMSNorm, with the sum written elsewhere or over a.
#include <gtest/gtest.h>

#include "gradient_check.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/residual.hpp"
#include "kernels/rmsnorm.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int rows = 5, C = 300;

// The norm's outputs (normalised rows, then its per-row statistics) for input `x`.
using Norm = std::vector<std::vector<float>> (*)(const NormInput& x);

std::vector<std::vector<float>> layernorm(const NormInput& x) {
  const FloatBuffer out("out", rows * C), mean("mean", rows), rstd("rstd", rows);
  const FloatBuffer weight = random_buffer(C, 7, 0.3f, 1.0f), bias = random_buffer(C, 8);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x, weight.data(), bias.data(), rows, C);
  return {to_host(out), to_host(mean), to_host(rstd)};
}

std::vector<std::vector<float>> rmsnorm(const NormInput& x) {
  const FloatBuffer out("out", rows * C), rstd("rstd", rows);
  const FloatBuffer weight = random_buffer(C, 7, 0.3f, 1.0f);
  rmsnorm_forward(out.data(), rstd.data(), x, weight.data(), 1e-6f, rows, C);
  return {to_host(out), to_host(rstd)};
}

class NormOfResidualSum : public ::testing::TestWithParam<Norm> {};

TEST_P(NormOfResidualSum, EqualsTheAddThenTheNorm) {
  const Norm norm = GetParam();
  const FloatBuffer a = random_buffer(rows * C, 1, 2.0f, 0.5f), b = random_buffer(rows * C, 2);
  const FloatBuffer added("added", rows * C), sum("sum", rows * C);
  residual_forward(added.data(), a.data(), b.data(), rows * C);
  const auto separate = norm(added.data());
  EXPECT_EQ(norm(NormInput::residual(sum.data(), a.data(), b.data())), separate);
  EXPECT_EQ(to_host(sum), to_host(added));
  EXPECT_EQ(norm(NormInput::residual(a.data(), a.data(), b.data())), separate);  // the sum over a
  EXPECT_EQ(to_host(a), to_host(added));
}

INSTANTIATE_TEST_SUITE_P(Norms, NormOfResidualSum, ::testing::Values(&layernorm, &rmsnorm));

}  // namespace
}  // namespace trident
