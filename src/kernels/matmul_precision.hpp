// The precision gemm() multiplies in (deck key train.precision, held by the GemmContext of
// kernels/gemm.hpp), and the rounding it implies: every product reads its inputs
// rounded to the chosen significand (round to nearest, ties to even, as the tensor cores convert)
// and accumulates in fp32. On the GPU build cuBLAS rounds to TF32 itself and multiplies bf16 copies;
// the CPU build emulates both by rounding copies of the operands before an fp32 product, which
// gives the same products exactly (the products of rounded inputs are exact in fp32).
#pragma once

#include <cstdint>

#include "deck/config.hpp"
#include "kernels/device.hpp"
#include "kernels/gemm.hpp"
#include "kernels/math.hpp"

namespace trident {

// `automatic` resolves to fp32 on the CPU build and TF32 on the GPU build; other values are kept.
MatmulPrecision resolve_matmul_precision(MatmulPrecision precision);

// Significand bits that rounding to `precision` drops from an fp32 value: 0, 13 (TF32) or 16 (bf16).
int dropped_significand_bits(MatmulPrecision precision);

// x rounded to nearest, ties to even, with its `dropped` low significand bits cleared; infinities
// and NaNs pass unchanged, and a value past the largest representable one becomes infinite.
KOKKOS_INLINE_FUNCTION float round_significand(float x, int dropped) {
  const unsigned bits = math::bit_cast<unsigned>(x);
  if (dropped == 0 || (bits & 0x7f800000u) == 0x7f800000u) return x;
  const unsigned lowest_kept = (bits >> dropped) & 1u;
  const unsigned rounded = bits + ((1u << (dropped - 1)) - 1u) + lowest_kept;
  return math::bit_cast<float>(rounded & ~((1u << dropped) - 1u));
}

// x as bf16 bits: rounded to nearest, ties to even, as products read it under bf16.
KOKKOS_INLINE_FUNCTION std::uint16_t bf16_bits(float x) {
  return static_cast<std::uint16_t>(math::bit_cast<unsigned>(round_significand(x, 16)) >> 16);
}

// out[i] = value, stored as `out` is kept: fp32, or bf16 bits (rounded as a product would read it).
KOKKOS_INLINE_FUNCTION void store(const ProductInput& out, long i, float value) {
  if (out.bf16)
    out.bf16[i] = bf16_bits(value);
  else
    out.fp32[i] = value;
}

// The fp32 value of bf16 bits (exact).
KOKKOS_INLINE_FUNCTION float bf16_value(std::uint16_t bits) {
  return math::bit_cast<float>(static_cast<unsigned>(bits) << 16);
}

// Elements a GEMM operand spans in memory: `batches` matrices `stride` apart, each `rows` rows of
// `columns` elements, `ld` apart (the stored layout, before any transpose).
long operand_extent(int rows, int columns, int ld, int batches = 1, long stride = 0);

// x[0, n) rounded to bf16 bits into the operand scratch's bf16 `slot`, by the gemm library's kernel
// (gemm_cblas.cpp, gemm_cublas.cpp).
const std::uint16_t* bf16_copy_in_scratch(GemmContext& context, int slot, const float* x, long n);

// Device scratch for the two operands of the product in progress: it grows as needed and is
// reused by the next product (floats, and std::uint16_t for bf16 bits); bf16 slot 2 holds a live
// RoundedOnce's copy (gemm.hpp). A GemmContext holds one.
class OperandScratch {
 public:
  float* floats(int slot, long n);
  std::uint16_t* halves(int slot, long n);
  // A copy of x[0, n) with `dropped` significand bits rounded off, in floats(slot, n).
  const float* rounded(int slot, const float* x, long n, int dropped);
  // bits[0, n) as fp32 values (exact), in floats(slot, n).
  const float* widened(int slot, const std::uint16_t* bits, long n);

 private:
  FloatBuffer floats_[2];
  Kokkos::View<std::uint16_t*, MemSpace> halves_[3];
};

}  // namespace trident
