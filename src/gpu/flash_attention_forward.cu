// flash_attention.hpp's forward launch: a query tile's online softmax over the key tiles up to the
// diagonal (FlashAttention-2's), on the tiles, products and launches of flash_attention_tiles.cuh;
// and which shapes the kernels (forward's and backward's) take.
#include <cmath>

#include "gpu/flash_attention.hpp"
#include "gpu/flash_attention_mma.cuh"
#include "gpu/flash_attention_tiles.cuh"

namespace trident {

namespace flash_detail {
namespace {

__device__ float warp_max(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

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
  const long kv_first = kv_start<HD>(t, b, g);

  const QueryHead<HD> head(t, b, h);
  load_tile<HD, V>(qs, t.q + head.q, t.q_ld, q0, t.T);
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

  float* lse = t.log_sum_exp_w + head.stats;
  for (int r = 0; r < kWarpRows; ++r) {
    const float inverse = 1.0f / row_sum[r];
    for (int d = lane; d < HD; d += 32) acc[r * S::acc_ld + d] *= inverse;
    if (lane == 0 && row0 + r < t.T) lse[row0 + r] = (row_max[r] + log2f(row_sum[r])) * kLn2;
  }
  __syncwarp();
  store_rows<HD>(t.out_w + head.out, t.out_ld, row0, t.T, acc, 1.0f);
}

// Version 3's online-softmax step over one key tile, in a warp's registers (flash_attention_mma.cuh):
// its scores s[16, 64] (rows row0 + Lane::row, keys k0 + 8j + Lane::column) scaled, masked on the
// diagonal tile, and replaced by their probabilities; the lane's two rows' running maximum and
// partial sums (over its columns) take the tile in, and the output accumulator is rescaled.
template <int HD>
struct RegisterSoftmax {
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

  __device__ void take(float (&s)[kTile / 8][4], float (&out)[HD / 8][4], const Lane& lane, int row0, int k0,
                       bool diagonal, float scale_log2) {
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kTile / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool visible = !diagonal || k0 + 8 * j + lane.column(e) <= row0 + lane.row(e);
        s[j][e] = visible ? s[j][e] * scale_log2 : -INFINITY;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], s[j][e]);
      }
    float correction[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 2; ++i) {  // key k0 is visible to every row (k0 <= row0): the maximum is finite
      const float new_max = fmaxf(row_max[i], group_max(tile_max[i]));
      correction[i] = exp2f(row_max[i] - new_max);
      row_max[i] = new_max;
    }
#pragma unroll
    for (int j = 0; j < kTile / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = exp2f(s[j][e] - row_max[e / 2]);
        sum[e / 2] += s[j][e];
      }
#pragma unroll
    for (int i = 0; i < 2; ++i) row_sum[i] = row_sum[i] * correction[i] + sum[i];
#pragma unroll
    for (int n = 0; n < HD / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) out[n][e] *= correction[e / 2];
  }
};

// Version 3: out = softmax(q·kᵀ)·v for a query tile with its scores and output in registers.
template <int HD>
__global__ void __launch_bounds__(kThreads) flash_forward_mma(Tensors t) {
  using S = Smem<HD>;
  extern __shared__ __align__(128) unsigned char smem[];
  const QueryTileBlock at(t);
  const Lane lane(at.lane);
  SharedPieces shared{smem};
  bf16* qs = shared.take<bf16>(S::tile);
  bf16* ks = shared.take<bf16>(S::tile);
  bf16* vs = shared.take<bf16>(S::tile);
  const long kv_first = kv_start<HD>(t, at.b, at.g);
  const bf16* warp_q = qs + at.warp * kWarpRows * S::ld;

  const QueryHead<HD> head(t, at.b, at.h);
  load_tile<HD, 2>(qs, t.q + head.q, t.q_ld, at.q0, t.T);
  float out[HD / 8][4];
  zero<HD>(out);
  RegisterSoftmax<HD> softmax;
  for (int k0 = 0; k0 <= at.q0; k0 += kTile) {
    __syncthreads();  // every warp is done with the previous k and v tiles
    load_tile<HD, 2>(ks, t.k + kv_first, t.kv_ld, k0, t.T);
    load_tile<HD, 2>(vs, t.v + kv_first, t.kv_ld, k0, t.T);
    __syncthreads();
    float s[kTile / 8][4];
    scores_of<HD, kTile>(s, warp_q, ks, at.lane);
    softmax.take(s, out, lane, at.row0, k0, k0 == at.q0, t.scale_log2);
    std::uint32_t p[kTile / 16][4];
    as_a_operand<kTile>(p, s);
    accumulate<HD, kTile>(out, p, vs, at.lane);
  }

  float* lse = t.log_sum_exp_w + head.stats;
  float inverse[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float sum = group_sum(softmax.row_sum[i]);
    const int row = at.row0 + lane.group + 8 * i;
    inverse[i] = 1.0f / sum;
    if (lane.pair == 0 && row < t.T) lse[row] = (softmax.row_max[i] + log2f(sum)) * kLn2;
  }
#pragma unroll
  for (int n = 0; n < HD / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) out[n][e] *= inverse[e / 2];
  __syncthreads();  // every warp is done with k and v: their space stages the output
  float* staging = reinterpret_cast<float*>(ks) + at.warp * kWarpRows * S::acc_ld;
  store_accumulator<HD>(t.out_w + head.out, t.out_ld, at.row0, t.T, staging, out, at.lane, 1.0f);
}

template <int HD>
void forward(const Tensors& t, int B, cudaStream_t stream) {
  const dim3 grid(tiles(t.T), t.heads, B);
  if (version() == 3) return launch<flash_forward_mma<HD>, MmaSmem<HD>::forward>(grid, t, stream);
  if (version() == 2) return launch<flash_forward<HD, 2>, Smem<HD>::forward>(grid, t, stream);
  launch<flash_forward<HD, 1>, Smem<HD>::forward>(grid, t, stream);
}

template <int HD>
struct Forward {
  static void run(const Tensors& t, int B, cudaStream_t stream) { forward<HD>(t, B, stream); }
};

}  // namespace
}  // namespace flash_detail

bool flash_attention_supports(const FlashAttentionShape& s) {
  const bool head_dim = s.head_dim == 16 || s.head_dim == 32 || s.head_dim == 64 || s.head_dim == 96 ||
                        s.head_dim == 128;
  return head_dim && s.kv_heads > 0 && s.heads % s.kv_heads == 0 && s.q_ld % 4 == 0 && s.kv_ld % 4 == 0 &&
         s.out_ld % 4 == 0 && s.B > 0 && s.T > 0;
}

void flash_attention_forward(float* out, float* log_sum_exp, const float* q, const float* k, const float* v,
                             const FlashAttentionShape& s, cudaStream_t stream) {
  flash_detail::Tensors t = flash_detail::tensors_of(s, {out, q, k, v});
  t.q = q, t.k = k, t.v = v, t.out_w = out, t.log_sum_exp_w = log_sum_exp;
  flash_detail::for_head_dim<flash_detail::Forward>(s.head_dim, t, s.B, stream);
}

}  // namespace trident
