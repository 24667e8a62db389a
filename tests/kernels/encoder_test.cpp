#include "kernels/encoder.hpp"

#include <gtest/gtest.h>

#include "gradient_check.hpp"
#include "kernels/column_blocks.hpp"

namespace trident {
namespace {

using namespace testing;

// C spans a full column block and a partial one; tokens repeat within and across sequences.
constexpr int B = 2, T = 4, C = kColumnBlock + 14, V = 7;
const std::vector<int> kTokens = {1, 3, 1, 6, 3, 3, 0, 1};

TEST(Encoder, ForwardAddsTokenAndPositionRows) {
  const FloatBuffer wte = random_buffer(V * C, 1), wpe = random_buffer(T * C, 2), out("out", B * T * C);
  encoder_forward(out.data(), int_buffer(kTokens).data(), wte.data(), wpe.data(), B, T, C);
  const auto hte = to_host(wte), hpe = to_host(wpe), hout = to_host(out);
  for (int bt = 0; bt < B * T; ++bt)
    for (int c = 0; c < C; ++c)
      EXPECT_EQ(hout[bt * C + c], hte[kTokens[bt] * C + c] + hpe[(bt % T) * C + c]);
}

TEST(Encoder, TokensInRangeRejectsNegativeAndTooLargeIds) {
  EXPECT_TRUE(tokens_in_range(int_buffer(kTokens).data(), B * T, V));
  EXPECT_FALSE(tokens_in_range(int_buffer({0, 7}).data(), 2, V));
  EXPECT_FALSE(tokens_in_range(int_buffer({-1, 2}).data(), 2, V));
}

TEST(Encoder, BackwardAccumulatesFiniteDifferenceGradients) {
  const FloatBuffer wte = random_buffer(V * C, 1), wpe = random_buffer(T * C, 2), out("out", B * T * C);
  const FloatBuffer proj = random_buffer(B * T * C, 3);
  const IntBuffer tokens = int_buffer(kTokens);
  auto objective = [&] {
    encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    return dot(proj, out);
  };
  // Start from non-zero gradients: backward must add to them.
  const FloatBuffer dwte = random_buffer(V * C, 4), dwpe = random_buffer(T * C, 5);
  const auto dwte_before = to_host(dwte), dwpe_before = to_host(dwpe);
  encoder_backward(dwte.data(), dwpe.data(), proj.data(), tokens.data(), B, T, C);
  expect_gradient("wte", wte, difference(to_host(dwte), dwte_before), objective, 1e-2f);
  expect_gradient("wpe", wpe, difference(to_host(dwpe), dwpe_before), objective, 1e-2f);
}

}  // namespace
}  // namespace trident
