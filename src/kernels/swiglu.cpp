#include "kernels/swiglu.hpp"

#include "kernels/device.hpp"
#include "kernels/math.hpp"

namespace trident {

namespace {

KOKKOS_INLINE_FUNCTION float sigmoid(float x) { return 1.0f / (1.0f + math::fast_exp(-x)); }

}  // namespace

void swiglu_forward(float* h, const float* gate, const float* up, long n) {
  Kokkos::parallel_for(
      "swiglu_forward", Kokkos::RangePolicy<ExecSpace>(0, n),
      KOKKOS_LAMBDA(long i) { h[i] = gate[i] * sigmoid(gate[i]) * up[i]; });
}

void swiglu_backward(float* dgate, float* dup, const float* dh, const float* gate, const float* up, long n) {
  Kokkos::parallel_for(
      "swiglu_backward", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(long i) {
        const float g = gate[i], s = sigmoid(g), d = dh[i];
        const float u = up[i];
        dgate[i] = d * u * s * (1.0f + g * (1.0f - s));
        dup[i] = d * g * s;
      });
}

}  // namespace trident
