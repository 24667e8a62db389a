// Scalar math callable inside kernels, spelled the same for every Kokkos version and backend
// (Kokkos 3.x keeps these in Kokkos::Experimental, Kokkos 4 in Kokkos).
#pragma once

#include <Kokkos_Core.hpp>

#include <bit>

namespace trident::math {

#if KOKKOS_VERSION >= 40000
using Kokkos::exp;
using Kokkos::log;
using Kokkos::sqrt;
using Kokkos::tanh;
#else
using Kokkos::Experimental::exp;
using Kokkos::Experimental::log;
using Kokkos::Experimental::sqrt;
using Kokkos::Experimental::tanh;
#endif

// exp(x) to within 2 ulp, from arithmetic alone so that loops calling it vectorise (libm's expf
// is an opaque call that keeps the GELU and softmax loops scalar). As Cephes' expf:
// exp(x) = 2^n · exp(r) with n = round(x / ln 2), |r| ≤ ln 2 / 2, exp(r) by a degree-6 polynomial.
// Arguments are clamped to the normal float range, so exp(x) ≥ 2^-126 (never 0) for tiny x.
KOKKOS_INLINE_FUNCTION float fast_exp(float x) {
  x = x < -87.3f ? -87.3f : (x > 88.3f ? 88.3f : x);
  constexpr float round_shift = 12582912.0f;  // 1.5 · 2^23: adding and subtracting it rounds to an integer
  const float n = (x * 1.44269504088896341f + round_shift) - round_shift;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln 2 split in two for exactness
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float exp_r = p * r * r + r + 1.0f;
  return exp_r * std::bit_cast<float>((static_cast<int>(n) + 127) << 23);
}

}  // namespace trident::math
