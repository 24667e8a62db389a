#include "kernels/swiglu.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gradient_check.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int rows = 5, F = 7;

// gate and up side by side in each row, as the fused gate|up product writes them.
struct SwigluCase {
  FloatBuffer gate_up = random_buffer(rows * 2 * F, 1, 3.0f);
  FloatBuffer h{"h", rows * F};
  void forward() { swiglu_forward(h.data(), gate_up.data(), rows, F); }
};

TEST(Swiglu, ForwardIsSiluOfGateTimesUp) {
  SwigluCase s;
  s.forward();
  const auto gu = to_host(s.gate_up), h = to_host(s.h);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < F; ++c) {
      const double g = gu[2 * F * r + c], u = gu[2 * F * r + F + c];
      const double expected = g / (1.0 + std::exp(-g)) * u;
      EXPECT_NEAR(h[F * r + c], expected, 1e-5 * (1.0 + std::abs(expected))) << r << ", " << c;
    }
}

// Stored for products in bf16 (train.precision = "bf16"): the fp32 result rounded.
TEST(Swiglu, Bf16OutputIsTheFp32OutputRounded) {
  SwigluCase s;
  s.forward();
  const Bf16Buffer h16("h16", rows * F);
  swiglu_forward(ProductInput::of_bf16(h16.data()), s.gate_up.data(), rows, F);
  expect_bf16_of(h16, s.h);
}

TEST(Swiglu, BackwardMatchesFiniteDifferences) {
  SwigluCase s;
  const FloatBuffer proj = random_buffer(rows * F, 3);
  auto objective = [&] {
    s.forward();
    return dot(proj, s.h);
  };
  const FloatBuffer d_gate_up = random_buffer(rows * 2 * F, 4);  // overwritten
  swiglu_backward(d_gate_up.data(), proj.data(), F, s.gate_up.data(), rows, F);
  expect_gradient("gate_up", s.gate_up, to_host(d_gate_up), objective, 1e-2f);
}

// dh may be the gate half of the output buffer (the down projection's input gradient written there
// with rows 2F apart): the same gradients as from a separate dh.
TEST(Swiglu, BackwardReadsDhFromTheGateHalf) {
  SwigluCase s;
  const FloatBuffer dh = random_buffer(rows * F, 3), separate("separate", rows * 2 * F);
  swiglu_backward(separate.data(), dh.data(), F, s.gate_up.data(), rows, F);
  std::vector<float> in_place(rows * 2 * F, -7.0f);
  const auto h_dh = to_host(dh);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < F; ++c) in_place[2 * F * r + c] = h_dh[F * r + c];
  FloatBuffer shared("shared", rows * 2 * F);
  copy_to(shared, in_place);
  swiglu_backward(shared.data(), shared.data(), 2 * F, s.gate_up.data(), rows, F);
  EXPECT_EQ(to_host(shared), to_host(separate));
}

// SwigluGrads' buffer, dh written where it says: fp32 gives the gradients of a separate dh; bf16
// their rounding, in the buffer's first half while dh lies in its second.
TEST(Swiglu, BackwardInItsBufferGivesTheGradientsOfASeparateDh) {
  SwigluCase s;
  const FloatBuffer dh = random_buffer(rows * F, 3), separate("separate", rows * 2 * F);
  swiglu_backward(separate.data(), dh.data(), F, s.gate_up.data(), rows, F);
  const std::vector<float> h_dh = to_host(dh), want = to_host(separate);
  for (const bool bf16 : {false, true}) {
    FloatBuffer buffer("buffer", rows * 2 * F);
    const SwigluGrads grads(buffer.data(), rows, F, bf16);
    std::vector<float> filled(rows * 2 * F, -7.0f);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < F; ++c) filled[(grads.dh_row(r) - buffer.data()) + c] = h_dh[F * r + c];
    copy_to(buffer, filled);
    swiglu_backward(grads.d_gate_up, grads.dh, grads.dh_ld, s.gate_up.data(), rows, F);
    if (!bf16) {
      EXPECT_EQ(to_host(buffer), want);
      continue;
    }
    const std::vector<float> got = to_host(buffer);
    std::vector<std::uint16_t> bits(rows * 2 * F);
    std::memcpy(bits.data(), got.data(), bits.size() * sizeof(std::uint16_t));  // the first half's bf16
    for (int i = 0; i < rows * 2 * F; ++i) ASSERT_EQ(bits[i], bf16_bits(want[i])) << i;
  }
}

// Under bf16 the gradients are stored as the products read them: the fp32 gradients rounded.
TEST(Swiglu, Bf16BackwardIsTheFp32BackwardRounded) {
  SwigluCase s;
  const FloatBuffer dh = random_buffer(rows * F, 3), fp32("fp32", rows * 2 * F);
  swiglu_backward(fp32.data(), dh.data(), F, s.gate_up.data(), rows, F);
  const Bf16Buffer bf16("bf16", rows * 2 * F);
  swiglu_backward(ProductInput::of_bf16(bf16.data()), dh.data(), F, s.gate_up.data(), rows, F);
  expect_bf16_of(bf16, fp32);
}

}  // namespace
}  // namespace trident
