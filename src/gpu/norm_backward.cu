// norm_backward.hpp's kernel: per row two passes over the row (its two projections summed over the
// warp, then the input gradient and the lane's weight-gradient terms), the row's values read again
// in the second pass (from L1 or L2: a row is at most 8 KB). A lane's columns are 4·(lane + 32·j)
// .. +3 for j < kChunks, a compile-time count, so that its sums stay in registers.
#include <stdexcept>

#include "gpu/cuda_check.hpp"
#include "gpu/norm_backward.hpp"

namespace trident {

namespace {

constexpr int kWarps = 8;  // per block: 256 threads
constexpr int kMultiprocessors = kNormBackwardBlocks / 2;
constexpr int kLaneFloats = 4;
constexpr int kRowChunk = 32 * kLaneFloats;  // columns a warp covers in one 16-byte step
constexpr int kMaxCentredColumns = 1024;     // LayerNorm: two sums a column
constexpr int kMaxColumns = 2048;            // RMSNorm: one
constexpr int kMaxSums4 = kMaxColumns / kLaneFloats;  // a block's sums, in float4s (both cases: 512)

__device__ float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

__device__ float4 operator+(float4 a, float4 b) { return {a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w}; }

template <int kChunks>
struct LaneSums {
  float4 dweight[kChunks];
  float4 dbias[kChunks];  // unused (and optimised away) without centring
};

// Four columns' dout, x and weight, from c on, read 16 bytes at a time.
struct Quad {
  float g[4], x[4], w[4];
};

__device__ Quad load_quad(const NormBackwardArgs& a, long offset, int c) {
  const float4 g = __ldg(reinterpret_cast<const float4*>(a.dout + offset + c));
  const float4 x = __ldg(reinterpret_cast<const float4*>(a.x + offset + c));
  const float4 w = __ldg(reinterpret_cast<const float4*>(a.weight + c));
  return {{g.x, g.y, g.z, g.w}, {x.x, x.y, x.z, x.w}, {w.x, w.y, w.z, w.w}};
}

// The row's two projections that the norm removes, Σ dnorm and Σ dnorm · norm (dnorm = γ · dout), over
// the whole warp.
template <bool kCentred, int kChunks>
__device__ float2 row_projections(const NormBackwardArgs& a, long offset, float m, float s, int lane) {
  float dnorm = 0.0f, dnorm_norm = 0.0f;
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int c = kLaneFloats * lane + kRowChunk * j;
    if (c >= a.C) continue;
    const Quad q = load_quad(a, offset, c);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float d = q.w[i] * q.g[i];
      dnorm += d;
      dnorm_norm += d * ((kCentred ? q.x[i] - m : q.x[i]) * s);
    }
  }
  return {warp_sum(dnorm), warp_sum(dnorm_norm)};
}

// dx += (dnorm − mean(dnorm) − norm · mean(dnorm · norm)) · s for the lane's columns (without
// centring, no mean(dnorm)); the lane's sums take norm · dout and dout.
template <bool kCentred, int kChunks>
__device__ void row_gradients(const NormBackwardArgs& a, long offset, float m, float s, float2 means, int lane,
                              LaneSums<kChunks>& sums) {
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int c = kLaneFloats * lane + kRowChunk * j;
    if (c >= a.C) continue;
    const Quad q = load_quad(a, offset, c);
    float4* dx = reinterpret_cast<float4*>(a.dx + offset + c);
    const float4 old = *dx;
    float out[4] = {old.x, old.y, old.z, old.w}, terms[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float norm = (kCentred ? q.x[i] - m : q.x[i]) * s;
      out[i] += (q.w[i] * q.g[i] - (kCentred ? means.x : 0.0f) - norm * means.y) * s;
      terms[i] = norm * q.g[i];
    }
    *dx = {out[0], out[1], out[2], out[3]};
    sums.dweight[j] = sums.dweight[j] + float4{terms[0], terms[1], terms[2], terms[3]};
    if (kCentred) sums.dbias[j] = sums.dbias[j] + float4{q.g[0], q.g[1], q.g[2], q.g[3]};
  }
}

// The block's sums in shared memory (dweight's C/4 float4s, then dbias's), the warps' added in warp order.
template <bool kCentred, int kChunks>
__device__ void add_warps_in_order(const LaneSums<kChunks>& sums, float4* block_sums, int C, int warp, int lane) {
  const int quarter = C / kLaneFloats;
  for (int w = 0; w < kWarps; ++w) {
    if (warp == w) {
#pragma unroll
      for (int j = 0; j < kChunks; ++j) {
        const int c = kLaneFloats * lane + kRowChunk * j;
        if (c >= C) continue;
        const int i = c / kLaneFloats;
        block_sums[i] = w == 0 ? sums.dweight[j] : block_sums[i] + sums.dweight[j];
        if (kCentred) block_sums[quarter + i] = w == 0 ? sums.dbias[j] : block_sums[quarter + i] + sums.dbias[j];
      }
    }
    __syncthreads();
  }
}

// Every block's sums into partials[block]; the last block to finish adds them into dweight (and
// dbias) in block order and resets the counter.
__device__ void add_blocks_in_order(const NormBackwardArgs& a, const float4* block_sums, int sums4) {
  float4* partials = reinterpret_cast<float4*>(a.partials);
  float4* mine = partials + static_cast<long>(blockIdx.x) * sums4;
  for (int i = threadIdx.x; i < sums4; i += blockDim.x) mine[i] = block_sums[i];
  __threadfence();  // this block's sums are visible before it counts itself done
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(a.finished, 1) == static_cast<int>(gridDim.x) - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int quarter = a.C / kLaneFloats;
  for (int i = threadIdx.x; i < sums4; i += blockDim.x) {
    float4 sum = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 8
    for (int b = 0; b < static_cast<int>(gridDim.x); ++b)
      sum = sum + __ldcg(partials + static_cast<long>(b) * sums4 + i);
    float* gradient = i < quarter ? a.dweight : a.dbias;  // null: not wanted
    if (!gradient) continue;
    float* into = gradient + kLaneFloats * (i % quarter);
    into[0] += sum.x, into[1] += sum.y, into[2] += sum.z, into[3] += sum.w;
  }
  if (threadIdx.x == 0) *a.finished = 0;
}

// Two blocks a multiprocessor (within 128 registers a thread) up to 12 chunks a lane; at 16 (RMSNorm's
// 2048 columns) one, whose threads have the registers for every load of a row's pass in flight.
constexpr int blocks_per_multiprocessor(int chunks) { return chunks > 12 ? 1 : 2; }

// Block b takes a contiguous share of the rows; its warp w the share's rows w, w + kWarps, ...
template <bool kCentred, int kChunks>
__global__ void __launch_bounds__(kWarps * 32, blocks_per_multiprocessor(kChunks))
    norm_backward_rows(NormBackwardArgs a) {
  __shared__ float4 block_sums[kMaxSums4];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int share = (a.rows + gridDim.x - 1) / gridDim.x;
  const int first = blockIdx.x * share, end = min(first + share, a.rows);
  LaneSums<kChunks> sums;
#pragma unroll
  for (int j = 0; j < kChunks; ++j) sums.dweight[j] = sums.dbias[j] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int r = first + warp; r < end; r += kWarps) {
    const long offset = static_cast<long>(r) * a.C;
    const float m = kCentred ? a.mean[r] : 0.0f, s = a.rstd[r];
    const float2 totals = row_projections<kCentred, kChunks>(a, offset, m, s, lane);
    const float2 means = {totals.x / a.C, totals.y / a.C};
    row_gradients<kCentred, kChunks>(a, offset, m, s, means, lane, sums);
  }
  add_warps_in_order<kCentred, kChunks>(sums, block_sums, a.C, warp, lane);
  add_blocks_in_order(a, block_sums, (kCentred ? 2 : 1) * a.C / kLaneFloats);
}

bool aligned(const void* p) { return reinterpret_cast<unsigned long>(p) % 16 == 0; }

// A block for every kWarps rows, up to the blocks the multiprocessors hold at once.
template <int kChunks>
dim3 blocks_for(int rows) {
  const int wanted = (rows + kWarps - 1) / kWarps, most = kMultiprocessors * blocks_per_multiprocessor(kChunks);
  return dim3(wanted < 1 ? 1 : (wanted < most ? wanted : most));
}

template <bool kCentred, int kChunks>
void launch_with(const NormBackwardArgs& a, cudaStream_t stream) {
  norm_backward_rows<kCentred, kChunks><<<blocks_for<kChunks>(a.rows), kWarps * 32, 0, stream>>>(a);
}

template <bool kCentred>
void launch(const NormBackwardArgs& a, cudaStream_t stream) {
  const int chunks = (a.C + kRowChunk - 1) / kRowChunk;
  if (chunks <= 2) launch_with<kCentred, 2>(a, stream);
  else if (chunks <= 4) launch_with<kCentred, 4>(a, stream);
  else if (chunks <= 6) launch_with<kCentred, 6>(a, stream);
  else if (chunks <= 8) launch_with<kCentred, 8>(a, stream);
  else if constexpr (!kCentred) {
    if (chunks <= 12) launch_with<false, 12>(a, stream);
    else launch_with<false, 16>(a, stream);
  }
  TRIDENT_GPU_CHECK(cudaGetLastError());
}

}  // namespace

bool norm_backward_supports(const NormBackwardArgs& a) {
  const int most = a.mean ? kMaxCentredColumns : kMaxColumns;
  return a.C > 0 && a.C % kLaneFloats == 0 && a.C <= most && aligned(a.dx) && aligned(a.dout) && aligned(a.x) &&
         aligned(a.weight);
}

long norm_backward_scratch_floats(int C, bool centred) {
  return static_cast<long>(kNormBackwardBlocks) * (centred ? 2 : 1) * C;
}

void norm_backward(const NormBackwardArgs& a, cudaStream_t stream) {
  if (!norm_backward_supports(a)) throw std::invalid_argument("norm_backward: a shape or alignment it does not take");
  if (a.mean)
    launch<true>(a, stream);
  else
    launch<false>(a, stream);
}

}  // namespace trident
