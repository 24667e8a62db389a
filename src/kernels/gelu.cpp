#include "kernels/gelu.hpp"

#include "kernels/device.hpp"
#include "kernels/math.hpp"

namespace trident {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// ½·(1 + tanh(u)) = sigmoid(2u): one exponential instead of a tanh.
KOKKOS_INLINE_FUNCTION float half_one_plus_tanh(float x) {
  const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
  return 1.0f / (1.0f + math::fast_exp(-2.0f * u));
}

}  // namespace

void gelu_forward(float* out, const float* x, long n) {
  Kokkos::parallel_for("gelu_forward", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(long i) {
    out[i] = x[i] * half_one_plus_tanh(x[i]);
  });
}

void gelu_backward(float* dx, const float* x, const float* dout, long n) {
  Kokkos::parallel_for("gelu_backward", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(long i) {
    const float s = half_one_plus_tanh(x[i]);
    const float du_dx = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x[i] * x[i]);
    dx[i] = dout[i] * (s + x[i] * 2.0f * s * (1.0f - s) * du_dx);
  });
}

}  // namespace trident
