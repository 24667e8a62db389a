// flash_attention.hpp's backward launches, on the tiles, products and launches of
// flash_attention_tiles.cuh: dQ per query tile over the key tiles up to the diagonal (and D =
// rowsum(dO ∘ O) for the second launch), then dK and dV per key tile over the query tiles from the
// diagonal on of every query head of its group. Each launch owns the gradients it writes: no atomics.
#include <cmath>

#include "gpu/flash_attention.hpp"
#include "gpu/flash_attention_mma.cuh"
#include "gpu/flash_attention_tiles.cuh"

namespace trident {

namespace flash_detail {
namespace {

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

template <int HD>
__device__ void stage_fragments(float* staging, FragAcc (&acc)[HD / 16]) {
#pragma unroll
  for (int n = 0; n < HD / 16; ++n)
    wmma::store_matrix_sync(staging + n * 16, acc[n], Smem<HD>::acc_ld, wmma::mem_row_major);
  __syncwarp();
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

// The dK, dV launches' statistics of the `rows` queries from q0 (a query head's from `stats`), into
// shared memory: the log-sum-exp in base 2 and D; zeros past T.
__device__ void load_query_statistics(float* lse, float* dot, const Tensors& t, long stats, int q0, int rows) {
  for (int i = threadIdx.x; i < rows; i += kThreads) {
    const bool inside = q0 + i < t.T;
    lse[i] = inside ? t.log_sum_exp[stats + q0 + i] * kLog2e : 0.0f;
    dot[i] = inside ? t.dots[stats + q0 + i] : 0.0f;
  }
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
  const QueryHead<HD> head(t, b, h);
  const long kv_first = kv_start<HD>(t, b, g);

  load_tile<HD, V>(qs, t.q + head.q, t.q_ld, q0, t.T);
  load_tile<HD, V>(dos, t.dout + head.out, t.out_ld, q0, t.T);
  const RowStatistics rows{dot, lse, head.out, head.stats, row0};
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
  store_rows<HD>(t.dq + head.q, t.q_ld, row0, t.T, scores, t.scale_log2 * kLn2);
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
  const long kv_first = kv_start<HD>(t, b, g);

  load_tile<HD, V>(ks, t.k + kv_first, t.kv_ld, k0, t.T);
  load_tile<HD, V>(vs, t.v + kv_first, t.kv_ld, k0, t.T);
  FragAcc dk[HD / 16], dv[HD / 16];
#pragma unroll
  for (int n = 0; n < HD / 16; ++n) wmma::fill_fragment(dk[n], 0.0f), wmma::fill_fragment(dv[n], 0.0f);

  for (int h = g * group; h < (g + 1) * group; ++h) {
    const QueryHead<HD> head(t, b, h);
    for (int q0 = k0; q0 < t.T; q0 += kTile) {
      __syncthreads();  // every warp is done with the previous query tile
      load_tile<HD, V>(qs, t.q + head.q, t.q_ld, q0, t.T);
      load_tile<HD, V>(dos, t.dout + head.out, t.out_ld, q0, t.T);
      load_query_statistics(lse, dot, t, head.stats, q0, kTile);
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

// Version 3's gradient of the scores in registers (flash_attention_mma.cuh): s[16, N] becomes
// P = exp2(s·scale − lse) where visible (else 0) and dp[16, N] becomes dS = P ∘ (dP − D); the
// statistics of element (r, c) are lse(r, c) and dot(r, c), of its query.
template <int N, class Visible, class Statistic>
__device__ void score_gradients(float (&s)[N / 8][4], float (&dp)[N / 8][4], float scale_log2, Visible visible,
                                Statistic lse, Statistic dot) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float p = visible(j, e) ? exp2f(s[j][e] * scale_log2 - lse(j, e)) : 0.0f;
      s[j][e] = p;
      dp[j][e] = p * (dp[j][e] - dot(j, e));
    }
}

// Version 3 of dQ's launch: a query tile's scores, dP and dQ in registers; D as version 2 takes it.
template <int HD>
__global__ void __launch_bounds__(kThreads) flash_query_grads_mma(Tensors t) {
  using S = Smem<HD>;
  extern __shared__ __align__(128) unsigned char smem[];
  const QueryTileBlock at(t);
  const Lane lane(at.lane);
  SharedPieces shared{smem};
  bf16* qs = shared.take<bf16>(S::tile);
  bf16* dos = shared.take<bf16>(S::tile);
  bf16* ks = shared.take<bf16>(S::tile);
  bf16* vs = shared.take<bf16>(S::tile);
  float* lse = shared.take<float>(S::row_stats) + at.warp * kWarpRows;  // the warp's rows
  float* dot = lse + kTile;
  const QueryHead<HD> head(t, at.b, at.h);
  const long kv_first = kv_start<HD>(t, at.b, at.g);

  load_tile<HD, 2>(qs, t.q + head.q, t.q_ld, at.q0, t.T);
  load_tile<HD, 2>(dos, t.dout + head.out, t.out_ld, at.q0, t.T);
  row_statistics_at_once<HD>(t, RowStatistics{dot, lse, head.out, head.stats, at.row0}, at.lane);
  __syncwarp();
  const float row_lse[2] = {lse[lane.group], lse[lane.group + 8]}, row_dot[2] = {dot[lane.group], dot[lane.group + 8]};
  const auto statistic = [](const float (&rows)[2]) { return [&rows](int, int e) { return rows[e / 2]; }; };
  float dq[HD / 8][4];
  zero<HD>(dq);
  for (int k0 = 0; k0 <= at.q0; k0 += kTile) {
    __syncthreads();  // every warp is done with the previous k and v tiles
    load_tile<HD, 2>(ks, t.k + kv_first, t.kv_ld, k0, t.T);
    load_tile<HD, 2>(vs, t.v + kv_first, t.kv_ld, k0, t.T);
    __syncthreads();
    float s[kTile / 8][4], ds[kTile / 8][4];
    scores_of<HD, kTile>(s, qs + at.warp * kWarpRows * S::ld, ks, at.lane);
    scores_of<HD, kTile>(ds, dos + at.warp * kWarpRows * S::ld, vs, at.lane);
    const bool edge = k0 == at.q0 || at.q0 + kTile > t.T;  // the diagonal, or rows past T
    const auto visible = [&](int j, int e) {
      const int row = at.row0 + lane.row(e);
      return !edge || (k0 + 8 * j + lane.column(e) <= row && row < t.T);
    };
    score_gradients<kTile>(s, ds, t.scale_log2, visible, statistic(row_lse), statistic(row_dot));
    std::uint32_t a[kTile / 16][4];
    as_a_operand<kTile>(a, ds);
    accumulate<HD, kTile>(dq, a, ks, at.lane);
  }
  __syncthreads();  // every warp is done with k and v: their space stages dQ
  float* staging = reinterpret_cast<float*>(ks) + at.warp * kWarpRows * S::acc_ld;
  store_accumulator<HD>(t.dq + head.q, t.q_ld, at.row0, t.T, staging, dq, at.lane, t.scale_log2 * kLn2);
}

// Version 3 of dK, dV's launch: per query tile (kKeyGradsQueries<HD> queries) a warp's Sᵀ and
// dPᵀ for its 16 keys in registers, Pᵀ and dSᵀ the A operands of dV += Pᵀ·dO and dK += dSᵀ·Q.
template <int HD>
__global__ void __launch_bounds__(kThreads) flash_key_grads_mma(Tensors t) {
  using S = Smem<HD>;
  constexpr int kQueries = kKeyGradsQueries<HD>;
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = threadIdx.x / 32, g = blockIdx.y, b = blockIdx.z, group = t.heads / t.kv_heads;
  const int k0 = blockIdx.x * kTile, key0 = k0 + warp * kWarpRows;
  const Lane lane(threadIdx.x % 32);
  SharedPieces shared{smem};
  bf16* ks = shared.take<bf16>(S::tile);
  bf16* vs = shared.take<bf16>(S::tile);
  bf16* qs = shared.take<bf16>(MmaSmem<HD>::query_tile);
  bf16* dos = shared.take<bf16>(MmaSmem<HD>::query_tile);
  float* lse = shared.take<float>(2 * kQueries * 4);  // of the query tile's rows
  float* dot = lse + kQueries;
  const long kv_first = kv_start<HD>(t, b, g);

  load_tile<HD, 2>(ks, t.k + kv_first, t.kv_ld, k0, t.T);
  load_tile<HD, 2>(vs, t.v + kv_first, t.kv_ld, k0, t.T);
  float dk[HD / 8][4], dv[HD / 8][4];
  zero<HD>(dk);
  zero<HD>(dv);
  const auto statistic = [&lane](const float* queries) {
    return [queries, &lane](int j, int e) { return queries[8 * j + lane.column(e)]; };
  };
  for (int h = g * group; h < (g + 1) * group; ++h) {
    const QueryHead<HD> head(t, b, h);
    for (int q0 = k0; q0 < t.T; q0 += kQueries) {
      __syncthreads();  // every warp is done with the previous query tile
      load_tile<HD, 2, kQueries>(qs, t.q + head.q, t.q_ld, q0, t.T);
      load_tile<HD, 2, kQueries>(dos, t.dout + head.out, t.out_ld, q0, t.T);
      load_query_statistics(lse, dot, t, head.stats, q0, kQueries);
      __syncthreads();
      float s[kQueries / 8][4], ds[kQueries / 8][4];
      scores_of<HD, kQueries>(s, ks + warp * kWarpRows * S::ld, qs, threadIdx.x % 32);
      scores_of<HD, kQueries>(ds, vs + warp * kWarpRows * S::ld, dos, threadIdx.x % 32);
      const bool edge = q0 < k0 + kTile || q0 + kQueries > t.T;  // the diagonal, or queries past T
      const auto visible = [&](int j, int e) {
        const int query = q0 + 8 * j + lane.column(e);
        return !edge || (key0 + lane.row(e) <= query && query < t.T);
      };
      score_gradients<kQueries>(s, ds, t.scale_log2, visible, statistic(lse), statistic(dot));
      std::uint32_t a[kQueries / 16][4];
      as_a_operand<kQueries>(a, s);
      accumulate<HD, kQueries>(dv, a, dos, threadIdx.x % 32);
      as_a_operand<kQueries>(a, ds);
      accumulate<HD, kQueries>(dk, a, qs, threadIdx.x % 32);
    }
  }
  __syncthreads();  // every warp is done with k and v: their space stages dK, then dV
  float* staging = reinterpret_cast<float*>(ks) + warp * kWarpRows * S::acc_ld;
  store_accumulator<HD>(t.dk + kv_first, t.kv_ld, key0, t.T, staging, dk, threadIdx.x % 32, t.scale_log2 * kLn2);
  __syncwarp();  // the warp's lanes are done reading dK's staging
  store_accumulator<HD>(t.dv + kv_first, t.kv_ld, key0, t.T, staging, dv, threadIdx.x % 32, 1.0f);
}

template <int HD>
void query_grads(const Tensors& t, int B, cudaStream_t stream) {
  const dim3 grid(tiles(t.T), t.heads, B);
  if (version() == 3) return launch<flash_query_grads_mma<HD>, MmaSmem<HD>::query_grads>(grid, t, stream);
  if (version() == 2) return launch<flash_query_grads<HD, 2>, Smem<HD>::query_grads>(grid, t, stream);
  launch<flash_query_grads<HD, 1>, Smem<HD>::query_grads>(grid, t, stream);
}

template <int HD>
void key_grads(const Tensors& t, int B, cudaStream_t stream) {
  const dim3 grid(tiles(t.T), t.kv_heads, B);
  if (version() == 3) return launch<flash_key_grads_mma<HD>, MmaSmem<HD>::key_grads>(grid, t, stream);
  if (version() == 2) return launch<flash_key_grads<HD, 2>, Smem<HD>::key_grads>(grid, t, stream);
  launch<flash_key_grads<HD, 1>, Smem<HD>::key_grads>(grid, t, stream);
}

template <int HD>
struct QueryGrads {
  static void run(const Tensors& t, int B, cudaStream_t stream) { query_grads<HD>(t, B, stream); }
};
template <int HD>
struct KeyGrads {
  static void run(const Tensors& t, int B, cudaStream_t stream) { key_grads<HD>(t, B, stream); }
};

}  // namespace
}  // namespace flash_detail

void flash_attention_query_grads(float* dq, float* output_dots, const float* dout, const float* q, const float* k,
                                 const float* v, const float* out, const float* log_sum_exp,
                                 const FlashAttentionShape& s, cudaStream_t stream) {
  flash_detail::Tensors t = flash_detail::tensors_of(s, {dq, dout, q, k, v, out});
  t.q = q, t.k = k, t.v = v, t.out = out, t.dout = dout, t.log_sum_exp = log_sum_exp;
  t.dq = dq, t.dots_w = output_dots;
  flash_detail::for_head_dim<flash_detail::QueryGrads>(s.head_dim, t, s.B, stream);
}

void flash_attention_key_grads(float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v,
                               const float* output_dots, const float* log_sum_exp, const FlashAttentionShape& s,
                               cudaStream_t stream) {
  flash_detail::Tensors t = flash_detail::tensors_of(s, {dk, dv, dout, q, k, v});
  t.q = q, t.k = k, t.v = v, t.dout = dout, t.log_sum_exp = log_sum_exp;
  t.dk = dk, t.dv = dv, t.dots = output_dots;
  flash_detail::for_head_dim<flash_detail::KeyGrads>(s.head_dim, t, s.B, stream);
}

}  // namespace trident
