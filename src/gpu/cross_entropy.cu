// cross_entropy.hpp's kernel. A lane's columns are 4·lane + 128·j .. +3; it keeps its own running
// maximum and sum, and the warp merges the lanes' pairs by shuffles.
#include <cmath>
#include <stdexcept>

#include "gpu/cross_entropy.hpp"
#include "gpu/cuda_check.hpp"

namespace trident {

namespace {

constexpr int kWarps = 8;      // per block
constexpr int kBlocks = 1056;  // eight a multiprocessor of an H100 or H200: 64 warps' loads in flight
constexpr int kLaneFloats = 4;

// Each block's loss sum, and how many blocks have added theirs (0 between launches).
__device__ double block_loss_sums[kBlocks];
__device__ unsigned blocks_done;

struct Softmax {
  float max, sum;  // sum of exp(logit − max)
};

// Two parts' statistics as one: the sum at the larger maximum.
__device__ Softmax merged(Softmax a, Softmax b) {
  const float max = fmaxf(a.max, b.max);
  if (max == -INFINITY) return {max, 0.0f};
  return {max, a.sum * expf(a.max - max) + b.sum * expf(b.max - max)};
}

__device__ Softmax warp_merged(Softmax s) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    s = merged(s, {__shfl_xor_sync(0xffffffffu, s.max, offset), __shfl_xor_sync(0xffffffffu, s.sum, offset)});
  return s;
}

// The row's maximum and sum of exponentials, over the whole warp.
__device__ Softmax row_softmax(const float4* row, int quads, int lane) {
  Softmax s{-INFINITY, 0.0f};
#pragma unroll 4
  for (int q = lane; q < quads; q += 32) {
    const float4 x = __ldg(row + q);
    const float max = fmaxf(fmaxf(x.x, x.y), fmaxf(x.z, x.w));
    if (max > s.max) s.sum *= expf(s.max - max), s.max = max;
    s.sum += expf(x.x - s.max) + expf(x.y - s.max) + expf(x.z - s.max) + expf(x.w - s.max);
  }
  return warp_merged(s);
}

// row ← softmax − onehot(target).
__device__ void write_gradient(float4* row, int quads, Softmax s, int target, int lane) {
  const float inverse = 1.0f / s.sum;
#pragma unroll 4
  for (int q = lane; q < quads; q += 32) {
    const float4 x = row[q];
    const int c = kLaneFloats * q;
    row[q] = {expf(x.x - s.max) * inverse - (c == target), expf(x.y - s.max) * inverse - (c + 1 == target),
              expf(x.z - s.max) * inverse - (c + 2 == target), expf(x.w - s.max) * inverse - (c + 3 == target)};
  }
}

// A block's loss sum: its warps' (each its rows' in order) in warp order; the last block's first
// warp adds the blocks' into *loss_sum, each lane every 32nd block, then the lanes by shuffles (an
// order fixed by the number of blocks).
__device__ void add_losses_in_order(double warp_sum, double* loss_sum) {
  __shared__ double warp_sums[kWarps];
  __shared__ bool last;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = warp_sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double sum = 0.0;
    for (int w = 0; w < kWarps; ++w) sum += warp_sums[w];
    block_loss_sums[blockIdx.x] = sum;
    __threadfence();
    last = atomicAdd(&blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last || warp != 0) return;
  __threadfence();
  double total = 0.0;
  for (unsigned b = lane; b < gridDim.x; b += 32) total += __ldcg(block_loss_sums + b);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) total += __shfl_xor_sync(0xffffffffu, total, offset);
  if (lane == 0) *loss_sum = total, blocks_done = 0;
}

__global__ void __launch_bounds__(kWarps * 32) cross_entropy_rows(float* logits, float* losses, const int* targets,
                                                                 int rows, int V, double* loss_sum) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, quads = V / kLaneFloats;
  const int share = (rows + gridDim.x - 1) / gridDim.x;
  const int first = blockIdx.x * share, end = min(first + share, rows);
  double warp_sum = 0.0;
  for (int r = first + warp; r < end; r += kWarps) {
    float* row = logits + static_cast<long>(r) * V;
    const int target = targets[r];
    const bool known = target >= 0 && target < V;
    const float target_logit = known ? row[target] : NAN;  // read before the shuffles below, so before any write
    const Softmax s = row_softmax(reinterpret_cast<const float4*>(row), quads, lane);
    write_gradient(reinterpret_cast<float4*>(row), quads, s, known ? target : -1, lane);
    const float loss = logf(s.sum) - (target_logit - s.max);
    if (lane == 0) losses[r] = loss;
    warp_sum += loss;
  }
  add_losses_in_order(warp_sum, loss_sum);
}

}  // namespace

bool cross_entropy_supports(const float* logits, int V) {
  return V > 0 && V % kLaneFloats == 0 && reinterpret_cast<unsigned long>(logits) % 16 == 0;
}

void cross_entropy(float* logits, float* losses, const int* targets, int rows, int V, double* loss_sum,
                   cudaStream_t stream) {
  if (!cross_entropy_supports(logits, V)) throw std::invalid_argument("cross_entropy: rows not 16-byte aligned");
  const int wanted = (rows + kWarps - 1) / kWarps, blocks = wanted < 1 ? 1 : (wanted < kBlocks ? wanted : kBlocks);
  cross_entropy_rows<<<blocks, kWarps * 32, 0, stream>>>(logits, losses, targets, rows, V, loss_sum);
  TRIDENT_GPU_CHECK(cudaGetLastError());
}

}  // namespace trident
