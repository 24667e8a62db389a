// Version 3 of flash_attention.hpp's kernels, the default (an H200, 2026-11-28: equal to the tiled
// kernel, 160-175 TFLOP/s at Llama 1B's shape, 3.3 times version 1): FlashAttention-2's register tiling. Where versions 1 and 2 (flash_attention_tiles.cuh) multiply
// WMMA fragments, whose element layout CUDA leaves unspecified, and so take every score tile through
// shared memory for the softmax, version 3 issues PTX's mma.sync m16n8k16 (bf16 in, fp32
// accumulate), whose fragment layout the PTX ISA specifies: a warp's scores, probabilities and
// output accumulator stay in its registers, the probabilities become the next product's A operand
// where they lie, and the operands come from shared memory by ldmatrix (transposed where the
// product reads a tile down its columns). A row's statistics live in the four lanes that hold it.
// The tiles, their loads and the launches are versions 1 and 2's.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "gpu/flash_attention_tiles.cuh"

namespace trident::flash_detail {

// Queries per tile of dK, dV's launch: 64 as the others' tiles, 32 from head dim 96 on, where the
// two [16, HD] accumulators a warp keeps take most of its registers.
template <int HD>
constexpr int kKeyGradsQueries = HD > 64 ? 32 : 64;

// Shared memory of version 3's blocks (bytes; Smem<HD>'s tiles): forward the q, k and v tiles;
// dQ the q, dO, k and v tiles and two statistics per query; dK, dV the k and v tiles, a query
// tile of q and of dO and two statistics per query. The k and v tiles, adjacent, hold the block's
// fp32 staging of its outputs at the end ([64, HD + 4] floats fit in [64, HD + 8] bf16 twice).
template <int HD>
struct MmaSmem {
  static constexpr int query_tile = kKeyGradsQueries<HD> * Smem<HD>::ld * 2;
  static constexpr int forward = 3 * Smem<HD>::tile;
  static constexpr int query_grads = 4 * Smem<HD>::tile + Smem<HD>::row_stats;
  static constexpr int key_grads = 2 * Smem<HD>::tile + 2 * query_tile + 2 * kKeyGradsQueries<HD> * 4;
  static_assert(kWarps * kWarpRows * Smem<HD>::acc_ld * 4 <= 2 * Smem<HD>::tile, "the staging fits in k and v");
  static_assert(query_tile % 128 == 0, "aligned pieces");
};

// Lane l's place in an mma.m16n8k16 accumulator [16, 8] (PTX ISA, "Matrix fragments for
// mma.m16n8k16"): group g = l / 4 holds rows g and g + 8, and position c = l % 4 columns 2c and
// 2c + 1; element e of the lane's four is (row(e), column(e)).
struct Lane {
  int group, pair;
  __device__ explicit Lane(int lane) : group(lane / 4), pair(lane % 4) {}
  __device__ int row(int e) const { return group + 8 * (e / 2); }
  __device__ int column(int e) const { return 2 * pair + e % 2; }
};

// d[16, 8] += a[16, 16] · b[16, 8]: a row-major, b column-major, bf16 → fp32, one HMMA.
__device__ inline void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8×8 bf16 matrices from shared memory, lane 8j + i giving row i of matrix j; `transposed`
// hands each lane the matrices' columns where it would get rows.
template <bool transposed>
__device__ inline void load_matrices(std::uint32_t (&r)[4], const bf16* row) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (transposed)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
}

// The A fragment of a tile's rows [0, 16), columns [k0, k0 + 16) (row-major, Smem<HD>::ld apart).
template <int HD>
__device__ inline void load_a(std::uint32_t (&a)[4], const bf16* rows, int k0, int lane) {
  load_matrices<false>(a, rows + (lane % 16) * Smem<HD>::ld + k0 + (lane / 16) * 8);
}

// B fragments of columns [n0, n0 + 16) over k [k0, k0 + 16) for a product with a tile's transpose
// (B[k][n] = tile[n][k]: Kᵀ in Q·Kᵀ): b[0], b[1] of columns n0 … n0 + 7, b[2], b[3] of the next 8.
template <int HD>
__device__ inline void load_b_transposed(std::uint32_t (&b)[4], const bf16* tile, int n0, int k0, int lane) {
  load_matrices<false>(b, tile + (n0 + lane % 8 + (lane / 16) * 8) * Smem<HD>::ld + k0 + ((lane / 8) % 2) * 8);
}

// The same for a product with the tile as it is (B[k][n] = tile[k][n]: V in P·V).
template <int HD>
__device__ inline void load_b(std::uint32_t (&b)[4], const bf16* tile, int k0, int n0, int lane) {
  load_matrices<true>(b, tile + (k0 + lane % 8 + ((lane / 8) % 2) * 8) * Smem<HD>::ld + n0 + (lane / 16) * 8);
}

// s[16, N] = rows[16, HD] · colsᵀ: a warp's 16 rows of one tile against N rows of another.
template <int HD, int N>
__device__ void scores_of(float (&s)[N / 8][4], const bf16* rows, const bf16* cols, int lane) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    std::uint32_t a[4];
    load_a<HD>(a, rows, 16 * kk, lane);
#pragma unroll
    for (int n = 0; n < N / 16; ++n) {
      std::uint32_t b[4];
      load_b_transposed<HD>(b, cols, 16 * n, 16 * kk, lane);
      mma(s[2 * n], a, b[0], b[1]);
      mma(s[2 * n + 1], a, b[2], b[3]);
    }
  }
}

inline __device__ std::uint32_t bf16_pair_bits(float first, float second) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(first, second);  // `first` in the low half
  return *reinterpret_cast<const std::uint32_t*>(&pair);
}

// An accumulator [16, N] rounded to bf16 as the A operand of the next product (its N columns that
// product's k): the accumulator's tiles 2kk and 2kk + 1 are A's k-step kk, lane for lane.
template <int N>
__device__ void as_a_operand(std::uint32_t (&a)[N / 16][4], const float (&c)[N / 8][4]) {
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk) {
    a[kk][0] = bf16_pair_bits(c[2 * kk][0], c[2 * kk][1]);
    a[kk][1] = bf16_pair_bits(c[2 * kk][2], c[2 * kk][3]);
    a[kk][2] = bf16_pair_bits(c[2 * kk + 1][0], c[2 * kk + 1][1]);
    a[kk][3] = bf16_pair_bits(c[2 * kk + 1][2], c[2 * kk + 1][3]);
  }
}

// acc[16, HD] += a[16, N] · tile[N, HD].
template <int HD, int N>
__device__ void accumulate(float (&acc)[HD / 8][4], const std::uint32_t (&a)[N / 16][4], const bf16* tile, int lane) {
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk)
#pragma unroll
    for (int n = 0; n < HD / 16; ++n) {
      std::uint32_t b[4];
      load_b<HD>(b, tile, 16 * kk, 16 * n, lane);
      mma(acc[2 * n], a[kk], b[0], b[1]);
      mma(acc[2 * n + 1], a[kk], b[2], b[3]);
    }
}

template <int HD>
__device__ void zero(float (&acc)[HD / 8][4]) {
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
}

// A warp's accumulator [16, HD] into its fp32 staging rows (Smem<HD>::acc_ld apart), for store_rows.
template <int HD>
__device__ void stage(float* staging, const float (&acc)[HD / 8][4], int lane) {
  const Lane at(lane);
#pragma unroll
  for (int n = 0; n < HD / 8; ++n)
#pragma unroll
    for (int half = 0; half < 2; ++half)
      *reinterpret_cast<float2*>(staging + at.row(2 * half) * Smem<HD>::acc_ld + 8 * n + 2 * at.pair) =
          make_float2(acc[n][2 * half], acc[n][2 * half + 1]);
}

// A warp's accumulator [16, HD] times `factor` to rows [first, first + 16) of dst (rows `ld` floats
// apart; rows past T skipped), 16 bytes at a time through the warp's staging rows.
template <int HD>
__device__ void store_accumulator(float* dst, long ld, int first, int T, float* staging,
                                  const float (&acc)[HD / 8][4], int lane, float factor) {
  stage<HD>(staging, acc, lane);
  __syncwarp();
  store_rows<HD>(dst, ld, first, T, staging, factor);
}

// Σ over the four lanes of a group (a row's columns in an accumulator), and the maximum.
__device__ inline float group_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ inline float group_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

}  // namespace trident::flash_detail
