// What flash_attention.hpp's kernels share (forward's in flash_attention_forward.cu, dQ's and dK,
// dV's in flash_attention_backward.cu): the tiles and their shared memory, the tiles' loads,
// products and stores, and the launches. Internal to those two files.
//
// A block of four warps takes one tile of 64 queries (forward, dQ) or 64 keys (dK, dV) of one
// sequence and head; each warp owns 16 of its rows. Tiles of q, k, v and dO enter shared memory as
// bf16 (16-byte loads, rounded on the way); the products are WMMA 16×16×16 bf16 → fp32 fragments
// (HMMA on the tensor cores); scores go through a per-warp fp32 tile in shared memory, where the
// warp's 32 lanes do the softmax row by row (a row's 64 columns, two per lane, reduced by shuffles).
// The exponentials are base 2 on scores pre-multiplied by log2(e)·scale, as FlashAttention does.
// Rows past T are computed on zeros and never written.
//
// Versions 1 and 2 of the kernels, a template parameter V: 1 as an H200 first ran them (2026-11-27:
// equal to the tiled kernel, 28-54 TFLOP/s; TRIDENT_FLASH_VERSION=1), and 2 (TRIDENT_FLASH_VERSION=2;
// not run on a GPU yet)
// with what that run's profile pointed at: a tile's 16-byte loads all issued before the first is
// converted (version 1 waits for each load in turn: a branch per row past T), and forward's
// softmax and dQ's row statistics a row's half per lane, the warp's 16 rows at once (version 1
// walks them one after another, with shuffle reductions and waited-for loads each). Version 3
// (flash_attention_mma.cuh), the default, keeps these tiles and loads and multiplies in registers
// instead.
#pragma once

#include <cuda_bf16.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>

#include "common/env_switch.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/flash_attention.hpp"

namespace trident::flash_detail {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

constexpr int kTile = 64;  // queries or keys in a block's tile
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kWarpRows = kTile / kWarps;  // 16: one WMMA fragment's height
constexpr int kScoreLd = kTile + 4;        // floats per row of a warp's score tile (padded against bank conflicts)
constexpr int kProbLd = kTile + 8;         // bf16 per row of a warp's probability tile
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Byte sizes of the shared-memory pieces for head dimension HD; each a multiple of 128 bytes, so
// that every piece (and every 16-row slice of one) is aligned as WMMA needs (32 bytes).
template <int HD>
struct Smem {
  static constexpr int ld = HD + 8;      // bf16 per row of a q, k, v or dO tile
  static constexpr int acc_ld = HD + 4;  // floats per row of a warp's [16, HD] fp32 staging
  static constexpr int tile = kTile * ld * 2;
  static constexpr int scores = kWarpRows * kScoreLd * 4;
  static constexpr int probs = kWarpRows * kProbLd * 2;
  static constexpr int acc = kWarpRows * acc_ld * 4;
  static constexpr int row_stats = 2 * kTile * 4;  // two fp32 statistics per row of a tile (128 bytes per warp)
  static_assert(tile % 128 == 0 && scores % 128 == 0 && probs % 128 == 0 && acc % 128 == 0, "aligned pieces");
  static_assert(acc <= 2 * scores, "a warp's [16, HD] output staging fits in its two score tiles");
  // forward: q, k, v tiles, the rows' running maximum and sum; per warp a score tile, its
  // probabilities and the output accumulator.
  static constexpr int forward = 3 * tile + row_stats + kWarps * (scores + probs + acc);
  // dQ: q, dO, k, v tiles, the rows' log-sum-exp and D; per warp the scores, dP and dS.
  static constexpr int query_grads = 4 * tile + row_stats + kWarps * (2 * scores + probs);
  // dK, dV: k, v, q, dO tiles, the query tile's log-sum-exp and D; per warp Sᵀ, dPᵀ, Pᵀ and dSᵀ.
  static constexpr int key_grads = 4 * tile + row_stats + kWarps * (2 * scores + 2 * probs);
};

// Everything a kernel reads and writes (`_w`: written where a tensor is also read elsewhere); rows
// of sequence b start at b·T·ld.
struct Tensors {
  const float *q, *k, *v, *out, *dout, *log_sum_exp, *dots;
  float *out_w, *log_sum_exp_w, *dots_w, *dq, *dk, *dv;
  int T, heads, kv_heads;
  long q_ld, kv_ld, out_ld;
  float scale_log2;  // log2(e) / √hd
};

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragAcc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

__device__ inline float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// Rows [first, first + Rows) of an fp32 tensor (HD columns from `src`, rows `ld` floats apart) into
// a bf16 tile, rows past T as zeros. The block's threads share it, four floats each at a time;
// version 2 issues up to eight of a thread's loads before converting any (a row past T reads row
// T − 1 and drops it), version 1 one load at a time.
template <int HD>
__device__ void store_bf16(bf16* tile, int i, float4 x) {
  constexpr int chunks = HD / 4;
  __nv_bfloat162* to = reinterpret_cast<__nv_bfloat162*>(tile + (i / chunks) * Smem<HD>::ld + 4 * (i % chunks));
  to[0] = __floats2bfloat162_rn(x.x, x.y);
  to[1] = __floats2bfloat162_rn(x.z, x.w);
}

template <int HD, int V, int Rows = kTile>
__device__ void load_tile(bf16* tile, const float* __restrict__ src, long ld, int first, int T) {
  constexpr int chunks = HD / 4;
  if constexpr (V == 1) {
    for (int i = threadIdx.x; i < Rows * chunks; i += kThreads) {
      const int row = i / chunks, column = 4 * (i % chunks);
      float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (first + row < T) x = __ldg(reinterpret_cast<const float4*>(src + (first + row) * ld + column));
      __nv_bfloat162* to = reinterpret_cast<__nv_bfloat162*>(tile + row * Smem<HD>::ld + column);
      to[0] = __floats2bfloat162_rn(x.x, x.y);
      to[1] = __floats2bfloat162_rn(x.z, x.w);
    }
  } else {
    // One batch of loads up to HD 64 (8 a thread); at HD 96 and 128, where dK and dV's accumulators
    // fill the registers, batches of 6 and 4, one after another (unrolled, they spilled).
    constexpr int per_thread = Rows * chunks / kThreads;  // 64 rows: 2, 4, 8, 12, 16 for HD 16 … 128
    constexpr int batch = HD == 96 ? 6 : HD == 128 ? 4 : per_thread;
    static_assert(Rows * chunks % kThreads == 0 && per_thread % batch == 0, "whole batches of loads");
#pragma unroll 1
    for (int j0 = 0; j0 < per_thread; j0 += batch) {
      float4 x[batch];
#pragma unroll
      for (int j = 0; j < batch; ++j) {
        const int i = threadIdx.x + (j0 + j) * kThreads, row = first + i / chunks;
        const int kept = row < T ? row : T - 1;
        x[j] = __ldg(reinterpret_cast<const float4*>(src + kept * ld + 4 * (i % chunks)));
      }
#pragma unroll
      for (int j = 0; j < batch; ++j) {
        const int i = threadIdx.x + (j0 + j) * kThreads;
        store_bf16<HD>(tile, i, first + i / chunks < T ? x[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f));
      }
    }
  }
}

// scores[16, 64] (fp32, kScoreLd) = rows · colsᵀ: `rows` a warp's 16 rows of one tile, `cols` the
// other tile's 64 rows (both [.., HD] bf16).
template <int HD>
__device__ void product_with_transpose(float* scores, const bf16* rows, const bf16* cols) {
#pragma unroll
  for (int n = 0; n < kTile / 16; ++n) {
    FragAcc acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      FragA a;
      FragBT b;
      wmma::load_matrix_sync(a, rows + kk * 16, Smem<HD>::ld);
      wmma::load_matrix_sync(b, cols + n * 16 * Smem<HD>::ld + kk * 16, Smem<HD>::ld);
      wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(scores + n * 16, acc, kScoreLd, wmma::mem_row_major);
  }
}

// A warp's 16 rows of fp32 results to device memory (rows past T skipped): row r of `staging`
// (acc_ld floats apart), times `factor`, to dst + (first + r)·ld.
template <int HD>
__device__ void store_rows(float* dst, long ld, int first, int T, const float* staging, float factor) {
  constexpr int chunks = HD / 4;
  for (int i = threadIdx.x % 32; i < kWarpRows * chunks; i += 32) {
    const int r = i / chunks, column = 4 * (i % chunks);
    if (first + r >= T) continue;
    const float* from = staging + r * Smem<HD>::acc_ld + column;
    // An explicit vector store: as a plain float4 assignment nvcc split dK's and dV's into four.
    __stwb(reinterpret_cast<float4*>(dst + (first + r) * ld + column),
           make_float4(from[0] * factor, from[1] * factor, from[2] * factor, from[3] * factor));
  }
}

// Where a head's rows start, in floats: query head h of sequence b in q, in out and dout, and in
// the per-row statistics (QueryHead); key/value head g in k and v (kv_start).
template <int HD>
struct QueryHead {
  long q, out, stats;
  __device__ QueryHead(const Tensors& t, int b, int h)
      : q(static_cast<long>(b) * t.T * t.q_ld + h * HD),
        out(static_cast<long>(b) * t.T * t.out_ld + h * HD),
        stats((static_cast<long>(b) * t.heads + h) * t.T) {}
};

template <int HD>
__device__ inline long kv_start(const Tensors& t, int b, int g) {
  return static_cast<long>(b) * t.T * t.kv_ld + static_cast<long>(g) * HD;
}

// Consecutive pieces of the block's shared memory (sizes from Smem, each a multiple of 128 bytes).
struct SharedPieces {
  unsigned char* next;
  template <class T>
  __device__ T* take(int bytes) {
    T* piece = reinterpret_cast<T*>(next);
    next += bytes;
    return piece;
  }
};

// Where a block of the forward or dQ launch works: sequence b, query head h of key/value head g,
// the query tile from q0 (tiles run longest first: the last sees the most keys), and this warp's
// 16 rows from row0.
struct QueryTileBlock {
  int warp, lane, h, b, g, q0, row0;
  __device__ explicit QueryTileBlock(const Tensors& t)
      : warp(threadIdx.x / 32),
        lane(threadIdx.x % 32),
        h(blockIdx.y),
        b(blockIdx.z),
        g(blockIdx.y / (t.heads / t.kv_heads)),
        q0((gridDim.x - 1 - blockIdx.x) * kTile),
        row0(q0 + warp * kWarpRows) {}
};

// Kernel on `grid` with `bytes` of shared memory; the limit above 48 KB is raised once per kernel
// (on the device current at the first launch), not at every launch.
template <void (*Kernel)(Tensors), int bytes>
void launch(dim3 grid, const Tensors& t, cudaStream_t stream) {
  static const bool raised = [] {
    TRIDENT_GPU_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    return true;
  }();
  (void)raised;
  Kernel<<<grid, kThreads, bytes, stream>>>(t);
  TRIDENT_GPU_CHECK(cudaGetLastError());
}

inline int tiles(int T) { return (T + kTile - 1) / kTile; }

// The kernels' version (TRIDENT_FLASH_VERSION: 1, 2 or 3, the default), read once.
inline int version() {
  static const int chosen = environment_says("TRIDENT_FLASH_VERSION", "1")   ? 1
                            : environment_says("TRIDENT_FLASH_VERSION", "2") ? 2
                                                                             : 3;
  return chosen;
}

// f<HD>() for the shape's head dimension (flash_attention_supports has checked it is one of these).
template <template <int> class F, class... Args>
void for_head_dim(int head_dim, Args&&... args) {
  switch (head_dim) {
    case 16: return F<16>::run(args...);
    case 32: return F<32>::run(args...);
    case 64: return F<64>::run(args...);
    case 96: return F<96>::run(args...);
    case 128: return F<128>::run(args...);
  }
}

inline bool aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// The kernels' scalar arguments for shape `s`, after checking that the kernels take it and that the
// tensors are 16-byte aligned (std::invalid_argument otherwise); the caller sets the pointers.
inline Tensors tensors_of(const FlashAttentionShape& s, std::initializer_list<const void*> pointers) {
  if (!flash_attention_supports(s)) throw std::invalid_argument("flash attention: unsupported shape");
  for (const void* p : pointers)
    if (!aligned(p)) throw std::invalid_argument("flash attention: a tensor is not 16-byte aligned");
  Tensors t{};
  t.T = s.T, t.heads = s.heads, t.kv_heads = s.kv_heads;
  t.q_ld = s.q_ld, t.kv_ld = s.kv_ld, t.out_ld = s.out_ld;
  t.scale_log2 = kLog2e / std::sqrt(static_cast<float>(s.head_dim));
  return t;
}

}  // namespace trident::flash_detail
