// GELU, tanh approximation (GPT-2): gelu(x) = ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), and its
// derivative, for kernels: the products' epilogues apply them (kernels/gemm_epilogue.hpp).
#pragma once

#include "kernels/math.hpp"

namespace trident::gelu_math {

inline constexpr float kSqrt2OverPi = 0.7978845608028654f;
inline constexpr float kCubic = 0.044715f;

// ½·(1 + tanh(u)) = sigmoid(2u): one exponential instead of a tanh.
KOKKOS_INLINE_FUNCTION float half_one_plus_tanh(float x) {
  const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
  return 1.0f / (1.0f + math::fast_exp(-2.0f * u));
}

KOKKOS_INLINE_FUNCTION float gelu(float x) { return x * half_one_plus_tanh(x); }

KOKKOS_INLINE_FUNCTION float gelu_grad(float x) {
  const float s = half_one_plus_tanh(x);
  const float du_dx = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
  return s + x * 2.0f * s * (1.0f - s) * du_dx;
}

}  // namespace trident::gelu_math
