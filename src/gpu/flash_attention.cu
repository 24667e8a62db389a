// flash_attention.hpp's kernels. A block of four warps takes one tile of 64 queries (forward, dQ)
// or 64 keys (dK, dV) of one sequence and head; each warp owns 16 of its rows. Tiles of q, k, v
// and dO enter shared memory as bf16 (16-byte loads, rounded on the way); the products are WMMA
// 16×16×16 bf16 → fp32 fragments (HMMA on the tensor cores); scores go through a per-warp fp32
// tile in shared memory, where the warp's 32 lanes do the softmax row by row (a row's 64 columns,
// two per lane, reduced by shuffles). The exponentials are base 2 on scores pre-multiplied by
// log2(e)·scale, as FlashAttention does. Rows past T are computed on zeros and never written.
//
// Two versions of the kernels, a template parameter V: 1 as an H200 first ran them (2026-11-27:
// equal to the tiled kernel, 28-54 TFLOP/s), and 2 (TRIDENT_FLASH_VERSION=2; not run on a GPU yet)
// with what that run's profile pointed at: a tile's 16-byte loads all issued before the first is
// converted (version 1 waits for each load in turn: a branch per row past T), and forward's
// softmax and dQ's row statistics a row's half per lane, the warp's 16 rows at once (version 1
// walks them one after another, with shuffle reductions and waited-for loads each).
#include <cuda_bf16.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "common/env_switch.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/flash_attention.hpp"

namespace trident {

namespace {

using namespace nvcuda;
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

__device__ float warp_max(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

__device__ float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// Rows [first, first + 64) of an fp32 tensor (HD columns from `src`, rows `ld` floats apart) into
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

template <int HD, int V>
__device__ void load_tile(bf16* tile, const float* __restrict__ src, long ld, int first, int T) {
  constexpr int chunks = HD / 4;
  if constexpr (V == 1) {
    for (int i = threadIdx.x; i < kTile * chunks; i += kThreads) {
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
    constexpr int per_thread = kTile * chunks / kThreads;  // 2, 4, 8, 12, 16 for HD 16 … 128
    constexpr int batch = HD == 96 ? 6 : HD == 128 ? 4 : per_thread;
    static_assert(kTile * chunks % kThreads == 0 && per_thread % batch == 0, "whole batches of loads");
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

// acc[n] += probs[16, 64] · tile[64, HD] for each 16-column block n of the tile.
template <int HD>
__device__ void accumulate_product(FragAcc (&acc)[HD / 16], const bf16* probs, const bf16* tile) {
  // Not unrolled at HD 128, where dK's and dV's accumulators take half the registers: unrolled,
  // the loads hoisted out of the loop made dK, dV's kernel spill.
#pragma unroll(HD < 128 ? kTile / 16 : 1)
  for (int kk = 0; kk < kTile / 16; ++kk) {
    FragA a;
    wmma::load_matrix_sync(a, probs + kk * 16, kProbLd);
#pragma unroll
    for (int n = 0; n < HD / 16; ++n) {
      FragB b;
      wmma::load_matrix_sync(b, tile + kk * 16 * Smem<HD>::ld + n * 16, Smem<HD>::ld);
      wmma::mma_sync(acc[n], a, b, acc[n]);
    }
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

template <int HD>
__device__ void stage_fragments(float* staging, FragAcc (&acc)[HD / 16]) {
#pragma unroll
  for (int n = 0; n < HD / 16; ++n) wmma::store_matrix_sync(staging + n * 16, acc[n], Smem<HD>::acc_ld, wmma::mem_row_major);
  __syncwarp();
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

// A warp's online-softmax step over one key tile (forward): its 16 rows' scores (fp32, scaled here)
// become probabilities (bf16, for P · V), the rows' running maximum and sum take the tile in, and
// the output accumulator is rescaled to the new maximum. Key k0 is always visible to every row (k0
// <= q0 <= the row's position), so each new maximum is finite.
struct SoftmaxTile {
  const float* scores;
  bf16* probs;
  float *acc, *row_max, *row_sum;
  int k0, row0, T;
  float scale_log2;
  __device__ float scaled(int r, int column) const {
    const int key = k0 + column;
    return key <= row0 + r && key < T ? scores[r * kScoreLd + column] * scale_log2 : -INFINITY;
  }
};

// Version 1: row after row, a row's 64 columns two per lane, reduced over the warp.
template <int HD>
__device__ void softmax_rows_in_turn(const SoftmaxTile& tile, int lane) {
  for (int r = 0; r < kWarpRows; ++r) {
    float s[2], tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      s[j] = tile.scaled(r, lane + 32 * j);
      tile_max = fmaxf(tile_max, s[j]);
    }
    const float new_max = fmaxf(tile.row_max[r], warp_max(tile_max));
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float p = exp2f(s[j] - new_max);
      sum += p;
      tile.probs[r * kProbLd + lane + 32 * j] = __float2bfloat16_rn(p);
    }
    const float correction = exp2f(tile.row_max[r] - new_max);
    sum = warp_sum(sum);
    __syncwarp();  // every lane has read the old statistics
    if (lane == 0) tile.row_sum[r] = tile.row_sum[r] * correction + sum, tile.row_max[r] = new_max;
    for (int d = lane; d < HD; d += 32) tile.acc[r * Smem<HD>::acc_ld + d] *= correction;
  }
}

// Version 2: the 16 rows at once, lanes 2r and 2r + 1 taking row r's two halves of 32 columns
// (read 16 bytes at a time, probabilities written 16 bytes at a time), combined by one shuffle.
template <int HD>
__device__ void softmax_rows_at_once(const SoftmaxTile& tile, int lane) {
  constexpr int kHalf = kTile / 2;
  const int r = lane / 2, first = kHalf * (lane % 2);
  float s[kHalf], tile_max = -INFINITY;
#pragma unroll
  for (int j = 0; j < kHalf; ++j) {
    s[j] = tile.scaled(r, first + j);
    tile_max = fmaxf(tile_max, s[j]);
  }
  const float old_max = tile.row_max[r];
  const float new_max = fmaxf(old_max, fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1)));
  float sum = 0.0f;
  bf16* probs = tile.probs + r * kProbLd + first;
#pragma unroll
  for (int j = 0; j < kHalf; j += 8) {
    __nv_bfloat162 packed[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float p0 = exp2f(s[j + 2 * e] - new_max), p1 = exp2f(s[j + 2 * e + 1] - new_max);
      sum += p0;
      sum += p1;
      packed[e] = __floats2bfloat162_rn(p0, p1);
    }
    *reinterpret_cast<uint4*>(probs + j) = *reinterpret_cast<const uint4*>(packed);
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  const float correction = exp2f(old_max - new_max);
  __syncwarp();  // both lanes of the row have read the old statistics
  if (lane % 2 == 0) tile.row_sum[r] = tile.row_sum[r] * correction + sum, tile.row_max[r] = new_max;
  float* acc = tile.acc + r * Smem<HD>::acc_ld + (lane % 2) * (HD / 2);
#pragma unroll
  for (int d = 0; d < HD / 2; d += 4) {
    float4 a = *reinterpret_cast<float4*>(acc + d);
    a.x *= correction, a.y *= correction, a.z *= correction, a.w *= correction;
    *reinterpret_cast<float4*>(acc + d) = a;
  }
}

// The dQ launch's per-row statistics for a warp's 16 rows, into shared memory: D = rowsum(dO ∘ O)
// (also written to device memory for the dK, dV launch) and the log-sum-exp in base 2; zeros for
// rows past T.
struct RowStatistics {
  float *dot, *lse;
  long out_first, stat_first;
  int row0;
};

// Version 1: row after row, a row's HD columns over the warp's lanes, reduced over the warp.
template <int HD>
__device__ void row_statistics_in_turn(const Tensors& t, const RowStatistics& at, int lane) {
  for (int r = 0; r < kWarpRows; ++r) {
    const int position = at.row0 + r;
    float partial = 0.0f;
    if (position < t.T)
      for (int d = lane; d < HD; d += 32)
        partial += t.dout[at.out_first + position * t.out_ld + d] * t.out[at.out_first + position * t.out_ld + d];
    partial = warp_sum(partial);
    if (lane == 0) {
      at.dot[r] = partial;
      at.lse[r] = position < t.T ? t.log_sum_exp[at.stat_first + position] * kLog2e : 0.0f;
      if (position < t.T) t.dots_w[at.stat_first + position] = partial;
    }
  }
}

// Version 2: the 16 rows at once, lanes 2r and 2r + 1 taking row r's two halves, four 16-byte loads
// of dO and of O issued together at a time (a row past T reads row T − 1 and drops it).
template <int HD>
__device__ void row_statistics_at_once(const Tensors& t, const RowStatistics& at, int lane) {
  constexpr int quads = HD / 8, batch = quads < 4 ? quads : 4;  // float4s in half a row
  const int r = lane / 2, position = at.row0 + r, kept = position < t.T ? position : t.T - 1;
  const long first = at.out_first + kept * t.out_ld + (lane % 2) * (HD / 2);
  const float4* dout = reinterpret_cast<const float4*>(t.dout + first);
  const float4* out = reinterpret_cast<const float4*>(t.out + first);
  float partial = 0.0f;
#pragma unroll
  for (int j0 = 0; j0 < quads; j0 += batch) {
    float4 a[batch], b[batch];
#pragma unroll
    for (int j = 0; j < batch; ++j) a[j] = __ldg(dout + j0 + j), b[j] = __ldg(out + j0 + j);
#pragma unroll
    for (int j = 0; j < batch; ++j) partial += a[j].x * b[j].x + a[j].y * b[j].y + a[j].z * b[j].z + a[j].w * b[j].w;
  }
  partial += __shfl_xor_sync(0xffffffffu, partial, 1);
  if (lane % 2 == 0) {
    const bool inside = position < t.T;
    at.dot[r] = inside ? partial : 0.0f;
    at.lse[r] = inside ? t.log_sum_exp[at.stat_first + position] * kLog2e : 0.0f;
    if (inside) t.dots_w[at.stat_first + position] = partial;
  }
}

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

template <int HD, int V>
__global__ void __launch_bounds__(kThreads) flash_forward(Tensors t) {
  using S = Smem<HD>;
  extern __shared__ __align__(128) unsigned char smem[];
  const QueryTileBlock at(t);
  const int warp = at.warp, lane = at.lane, h = at.h, b = at.b, g = at.g, q0 = at.q0, row0 = at.row0;
  SharedPieces shared{smem};
  bf16* qs = shared.take<bf16>(S::tile);
  bf16* ks = shared.take<bf16>(S::tile);
  bf16* vs = shared.take<bf16>(S::tile);
  float* row_max = shared.take<float>(S::row_stats) + warp * kWarpRows;  // the warp's rows
  float* row_sum = row_max + kTile;
  shared.next += warp * (S::scores + S::probs + S::acc);
  float* scores = shared.take<float>(S::scores);
  bf16* probs = shared.take<bf16>(S::probs);
  float* acc = shared.take<float>(S::acc);
  const long kv_first = static_cast<long>(b) * t.T * t.kv_ld + static_cast<long>(g) * HD;

  load_tile<HD, V>(qs, t.q + static_cast<long>(b) * t.T * t.q_ld + h * HD, t.q_ld, q0, t.T);
  for (int i = lane; i < kWarpRows * S::acc_ld; i += 32) acc[i] = 0.0f;
  if (lane < kWarpRows) row_max[lane] = -INFINITY, row_sum[lane] = 0.0f;

  for (int k0 = 0; k0 <= q0; k0 += kTile) {
    __syncthreads();  // every warp is done with the previous k and v tiles
    load_tile<HD, V>(ks, t.k + kv_first, t.kv_ld, k0, t.T);
    load_tile<HD, V>(vs, t.v + kv_first, t.kv_ld, k0, t.T);
    __syncthreads();
    product_with_transpose<HD>(scores, qs + warp * kWarpRows * S::ld, ks);
    __syncwarp();
    const SoftmaxTile tile{scores, probs, acc, row_max, row_sum, k0, row0, t.T, t.scale_log2};
    if constexpr (V == 1)
      softmax_rows_in_turn<HD>(tile, lane);
    else
      softmax_rows_at_once<HD>(tile, lane);
    __syncwarp();
#pragma unroll
    for (int n = 0; n < HD / 16; ++n) {  // acc += P · V, block column by block column
      FragAcc o;
      wmma::load_matrix_sync(o, acc + n * 16, S::acc_ld, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        FragA p;
        FragB v;
        wmma::load_matrix_sync(p, probs + kk * 16, kProbLd);
        wmma::load_matrix_sync(v, vs + kk * 16 * S::ld + n * 16, S::ld);
        wmma::mma_sync(o, p, v, o);
      }
      wmma::store_matrix_sync(acc + n * 16, o, S::acc_ld, wmma::mem_row_major);
    }
    __syncwarp();
  }

  float* lse = t.log_sum_exp_w + (static_cast<long>(b) * t.heads + h) * t.T;
  for (int r = 0; r < kWarpRows; ++r) {
    const float inverse = 1.0f / row_sum[r];
    for (int d = lane; d < HD; d += 32) acc[r * S::acc_ld + d] *= inverse;
    if (lane == 0 && row0 + r < t.T) lse[row0 + r] = (row_max[r] + log2f(row_sum[r])) * kLn2;
  }
  __syncwarp();
  store_rows<HD>(t.out_w + static_cast<long>(b) * t.T * t.out_ld + h * HD, t.out_ld, row0, t.T, acc, 1.0f);
}

// dQ = scale · dS · K over the key tiles up to the diagonal, dS = P ∘ (dP − D), dP = dO · Vᵀ;
// writes D = rowsum(dO ∘ O) for the dK, dV launch.
template <int HD, int V>
__global__ void __launch_bounds__(kThreads) flash_query_grads(Tensors t) {
  using S = Smem<HD>;
  extern __shared__ __align__(128) unsigned char smem[];
  const QueryTileBlock at(t);
  const int warp = at.warp, lane = at.lane, h = at.h, b = at.b, g = at.g, q0 = at.q0, row0 = at.row0;
  SharedPieces shared{smem};
  bf16* qs = shared.take<bf16>(S::tile);
  bf16* dos = shared.take<bf16>(S::tile);
  bf16* ks = shared.take<bf16>(S::tile);
  bf16* vs = shared.take<bf16>(S::tile);
  float* lse = shared.take<float>(S::row_stats) + warp * kWarpRows;  // the warp's rows
  float* dot = lse + kTile;
  shared.next += warp * (2 * S::scores + S::probs);
  float* scores = shared.take<float>(S::scores);
  float* dprobs = shared.take<float>(S::scores);
  bf16* dscores = shared.take<bf16>(S::probs);
  const long q_first = static_cast<long>(b) * t.T * t.q_ld + h * HD;
  const long out_first = static_cast<long>(b) * t.T * t.out_ld + h * HD;
  const long kv_first = static_cast<long>(b) * t.T * t.kv_ld + static_cast<long>(g) * HD;
  const long stat_first = (static_cast<long>(b) * t.heads + h) * t.T;

  load_tile<HD, V>(qs, t.q + q_first, t.q_ld, q0, t.T);
  load_tile<HD, V>(dos, t.dout + out_first, t.out_ld, q0, t.T);
  const RowStatistics rows{dot, lse, out_first, stat_first, row0};
  if constexpr (V == 1)
    row_statistics_in_turn<HD>(t, rows, lane);
  else
    row_statistics_at_once<HD>(t, rows, lane);
  FragAcc dq[HD / 16];
#pragma unroll
  for (int n = 0; n < HD / 16; ++n) wmma::fill_fragment(dq[n], 0.0f);

  for (int k0 = 0; k0 <= q0; k0 += kTile) {
    __syncthreads();  // every warp is done with the previous k and v tiles (and has written its statistics)
    load_tile<HD, V>(ks, t.k + kv_first, t.kv_ld, k0, t.T);
    load_tile<HD, V>(vs, t.v + kv_first, t.kv_ld, k0, t.T);
    __syncthreads();
    product_with_transpose<HD>(scores, qs + warp * kWarpRows * S::ld, ks);
    product_with_transpose<HD>(dprobs, dos + warp * kWarpRows * S::ld, vs);
    __syncwarp();
    for (int r = 0; r < kWarpRows; ++r)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int column = lane + 32 * j, key = k0 + column, position = row0 + r;
        const bool visible = key <= position && key < t.T && position < t.T;
        const float p = visible ? exp2f(scores[r * kScoreLd + column] * t.scale_log2 - lse[r]) : 0.0f;
        dscores[r * kProbLd + column] = __float2bfloat16_rn(p * (dprobs[r * kScoreLd + column] - dot[r]));
      }
    __syncwarp();
    accumulate_product<HD>(dq, dscores, ks);
  }
  stage_fragments<HD>(scores, dq);  // the warp's own score tiles, free now
  store_rows<HD>(t.dq + q_first, t.q_ld, row0, t.T, scores, t.scale_log2 * kLn2);
}

// dV = Σ Pᵀ · dO and dK = scale · Σ dSᵀ · Q over the query tiles from the diagonal on, for every
// query head of the key/value head's group: each block owns its 64 keys' gradients (no atomics).
template <int HD, int V>
__global__ void __launch_bounds__(kThreads) flash_key_grads(Tensors t) {
  using S = Smem<HD>;
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = blockIdx.y, b = blockIdx.z, group = t.heads / t.kv_heads;
  const int k0 = blockIdx.x * kTile, key0 = k0 + warp * kWarpRows;
  SharedPieces shared{smem};
  bf16* ks = shared.take<bf16>(S::tile);
  bf16* vs = shared.take<bf16>(S::tile);
  bf16* qs = shared.take<bf16>(S::tile);
  bf16* dos = shared.take<bf16>(S::tile);
  float* lse = shared.take<float>(S::row_stats);  // of the query tile's rows
  float* dot = lse + kTile;
  shared.next += warp * (2 * S::scores + 2 * S::probs);
  float* scores = shared.take<float>(S::scores);  // Sᵀ: a row per key, a column per query
  float* dprobs = shared.take<float>(S::scores);
  bf16* probs = shared.take<bf16>(S::probs);
  bf16* dscores = shared.take<bf16>(S::probs);
  const long kv_first = static_cast<long>(b) * t.T * t.kv_ld + static_cast<long>(g) * HD;

  load_tile<HD, V>(ks, t.k + kv_first, t.kv_ld, k0, t.T);
  load_tile<HD, V>(vs, t.v + kv_first, t.kv_ld, k0, t.T);
  FragAcc dk[HD / 16], dv[HD / 16];
#pragma unroll
  for (int n = 0; n < HD / 16; ++n) wmma::fill_fragment(dk[n], 0.0f), wmma::fill_fragment(dv[n], 0.0f);

  for (int h = g * group; h < (g + 1) * group; ++h) {
    const long q_first = static_cast<long>(b) * t.T * t.q_ld + h * HD;
    const long out_first = static_cast<long>(b) * t.T * t.out_ld + h * HD;
    const long stat_first = (static_cast<long>(b) * t.heads + h) * t.T;
    for (int q0 = k0; q0 < t.T; q0 += kTile) {
      __syncthreads();  // every warp is done with the previous query tile
      load_tile<HD, V>(qs, t.q + q_first, t.q_ld, q0, t.T);
      load_tile<HD, V>(dos, t.dout + out_first, t.out_ld, q0, t.T);
      for (int i = threadIdx.x; i < kTile; i += kThreads) {
        const bool inside = q0 + i < t.T;
        lse[i] = inside ? t.log_sum_exp[stat_first + q0 + i] * kLog2e : 0.0f;
        dot[i] = inside ? t.dots[stat_first + q0 + i] : 0.0f;
      }
      __syncthreads();
      product_with_transpose<HD>(scores, ks + warp * kWarpRows * S::ld, qs);
      product_with_transpose<HD>(dprobs, vs + warp * kWarpRows * S::ld, dos);
      __syncwarp();
      for (int r = 0; r < kWarpRows; ++r)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int column = lane + 32 * j, position = q0 + column, key = key0 + r;
          const bool visible = key <= position && position < t.T && key < t.T;
          const float p = visible ? exp2f(scores[r * kScoreLd + column] * t.scale_log2 - lse[column]) : 0.0f;
          probs[r * kProbLd + column] = __float2bfloat16_rn(p);
          dscores[r * kProbLd + column] = __float2bfloat16_rn(p * (dprobs[r * kScoreLd + column] - dot[column]));
        }
      __syncwarp();
      accumulate_product<HD>(dv, probs, dos);
      accumulate_product<HD>(dk, dscores, qs);
    }
  }
  stage_fragments<HD>(scores, dk);
  store_rows<HD>(t.dk + kv_first, t.kv_ld, key0, t.T, scores, t.scale_log2 * kLn2);
  __syncwarp();
  stage_fragments<HD>(scores, dv);
  store_rows<HD>(t.dv + kv_first, t.kv_ld, key0, t.T, scores, 1.0f);
}

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

int tiles(int T) { return (T + kTile - 1) / kTile; }

// The kernels' version (TRIDENT_FLASH_VERSION: 1, the default, or 2), read once.
int version() {
  static const int chosen = environment_says("TRIDENT_FLASH_VERSION", "2") ? 2 : 1;
  return chosen;
}

template <int HD>
void forward(const Tensors& t, int B, cudaStream_t stream) {
  const dim3 grid(tiles(t.T), t.heads, B);
  if (version() == 2) return launch<flash_forward<HD, 2>, Smem<HD>::forward>(grid, t, stream);
  launch<flash_forward<HD, 1>, Smem<HD>::forward>(grid, t, stream);
}

template <int HD>
void query_grads(const Tensors& t, int B, cudaStream_t stream) {
  const dim3 grid(tiles(t.T), t.heads, B);
  if (version() == 2) return launch<flash_query_grads<HD, 2>, Smem<HD>::query_grads>(grid, t, stream);
  launch<flash_query_grads<HD, 1>, Smem<HD>::query_grads>(grid, t, stream);
}

template <int HD>
void key_grads(const Tensors& t, int B, cudaStream_t stream) {
  const dim3 grid(tiles(t.T), t.kv_heads, B);
  if (version() == 2) return launch<flash_key_grads<HD, 2>, Smem<HD>::key_grads>(grid, t, stream);
  launch<flash_key_grads<HD, 1>, Smem<HD>::key_grads>(grid, t, stream);
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
template <int HD>
struct Forward {
  static void run(const Tensors& t, int B, cudaStream_t stream) { forward<HD>(t, B, stream); }
};
template <int HD>
struct QueryGrads {
  static void run(const Tensors& t, int B, cudaStream_t stream) { query_grads<HD>(t, B, stream); }
};
template <int HD>
struct KeyGrads {
  static void run(const Tensors& t, int B, cudaStream_t stream) { key_grads<HD>(t, B, stream); }
};

bool aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

Tensors tensors_of(const FlashAttentionShape& s, std::initializer_list<const void*> pointers) {
  if (!flash_attention_supports(s)) throw std::invalid_argument("flash attention: unsupported shape");
  for (const void* p : pointers)
    if (!aligned(p)) throw std::invalid_argument("flash attention: a tensor is not 16-byte aligned");
  Tensors t{};
  t.T = s.T, t.heads = s.heads, t.kv_heads = s.kv_heads;
  t.q_ld = s.q_ld, t.kv_ld = s.kv_ld, t.out_ld = s.out_ld;
  t.scale_log2 = kLog2e / std::sqrt(static_cast<float>(s.head_dim));
  return t;
}

}  // namespace

bool flash_attention_supports(const FlashAttentionShape& s) {
  const bool head_dim = s.head_dim == 16 || s.head_dim == 32 || s.head_dim == 64 || s.head_dim == 96 ||
                        s.head_dim == 128;
  return head_dim && s.kv_heads > 0 && s.heads % s.kv_heads == 0 && s.q_ld % 4 == 0 && s.kv_ld % 4 == 0 &&
         s.out_ld % 4 == 0 && s.B > 0 && s.T > 0;
}

void flash_attention_forward(float* out, float* log_sum_exp, const float* q, const float* k, const float* v,
                             const FlashAttentionShape& s, cudaStream_t stream) {
  Tensors t = tensors_of(s, {out, q, k, v});
  t.q = q, t.k = k, t.v = v, t.out_w = out, t.log_sum_exp_w = log_sum_exp;
  for_head_dim<Forward>(s.head_dim, t, s.B, stream);
}

void flash_attention_query_grads(float* dq, float* output_dots, const float* dout, const float* q, const float* k,
                                 const float* v, const float* out, const float* log_sum_exp,
                                 const FlashAttentionShape& s, cudaStream_t stream) {
  Tensors t = tensors_of(s, {dq, dout, q, k, v, out});
  t.q = q, t.k = k, t.v = v, t.out = out, t.dout = dout, t.log_sum_exp = log_sum_exp;
  t.dq = dq, t.dots_w = output_dots;
  for_head_dim<QueryGrads>(s.head_dim, t, s.B, stream);
}

void flash_attention_key_grads(float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v,
                               const float* output_dots, const float* log_sum_exp, const FlashAttentionShape& s,
                               cudaStream_t stream) {
  Tensors t = tensors_of(s, {dk, dv, dout, q, k, v});
  t.q = q, t.k = k, t.v = v, t.dout = dout, t.log_sum_exp = log_sum_exp;
  t.dk = dk, t.dv = dv, t.dots = output_dots;
  for_head_dim<KeyGrads>(s.head_dim, t, s.B, stream);
}

}  // namespace trident
