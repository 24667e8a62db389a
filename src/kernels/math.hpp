// Scalar math callable inside kernels, spelled the same for every Kokkos version and backend
// (Kokkos 3.x keeps these in Kokkos::Experimental, Kokkos 4 in Kokkos).
#pragma once

#include <Kokkos_Core.hpp>

#include <bit>
#include <cstring>

namespace trident::math {

#if KOKKOS_VERSION >= 40000
using Kokkos::log;
using Kokkos::sqrt;
#else
using Kokkos::Experimental::log;
using Kokkos::Experimental::sqrt;
#endif

// std::bit_cast for kernels: it is host-only under nvcc, where a memcpy (a register move) does it.
template <class To, class From>
KOKKOS_INLINE_FUNCTION To bit_cast(const From& from) {
#ifdef __CUDA_ARCH__
  To to;
  memcpy(&to, &from, sizeof to);
  return to;
#else
  return std::bit_cast<To>(from);
#endif
}

// exp(x) to within 2 ulp, from arithmetic alone so that loops calling it vectorise (libm's expf
// is an opaque call that keeps the GELU and softmax loops scalar). As Cephes' expf:
// exp(x) = 2^n · exp(r) with n = round(x / ln 2), |r| ≤ ln 2 / 2, exp(r) by a degree-6 polynomial.
// Results below 2^-125 (x < -86.6) are flushed to 0 and results above 2^127 (x > 88.4) are +inf,
// so no denormal is ever produced: on x86 each costs a microcode assist of ~100 cycles, and
// vectorised code evaluates every branch of the clamps.
KOKKOS_INLINE_FUNCTION float fast_exp(float x) {
  x = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);  // keeps n small; results there are 0 or +inf
  constexpr float round_shift = 12582912.0f;  // 1.5 · 2^23: adding and subtracting it rounds to an integer
  const float shifted = x * 1.44269504088896341f + round_shift;
  const float n = shifted - round_shift;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln 2 split in two for exactness
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float exp_r = p * r * r + r + 1.0f;
  // 2^n from n's bits in `shifted` (it is n + 1.5·2^23), selected in integers so nothing denormal
  // is computed even speculatively.
  const int biased = bit_cast<int>(shifted) - bit_cast<int>(round_shift) + 127;
  const int scale = biased < 2 ? 0 : (biased > 254 ? 0x7F800000 : biased << 23);
  return exp_r * bit_cast<float>(scale);
}

}  // namespace trident::math
