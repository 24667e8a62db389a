// A norm's backward on the GPU in one launch (LayerNorm's and RMSNorm's: one kernel, the centring a
// parameter): the input gradient row by row and the weight (and bias) gradients summed over the
// rows, at the memory's speed. A warp takes a row, 16 bytes a lane at a time; each lane keeps its
// columns' weight-gradient sums in registers across all its rows, so the sums cost no memory
// traffic per row (the Kokkos kernel, kernels/column_sums.hpp, adds them into memory per row). The
// sums are deterministic: a row's warp and a block's rows are fixed by the shape, a block adds its
// warps' sums in warp order, and the last block to finish adds the blocks' sums in block order.
#pragma once

#include <cuda_runtime.h>

namespace trident {

// Blocks of a launch: two per multiprocessor of an H100 or H200.
inline constexpr int kNormBackwardBlocks = 264;

struct NormBackwardArgs {
  float* dx;              // added to: dx += ∂loss/∂x
  float* dweight;         // added to: Σ_rows normalised x · dout
  float* dbias;           // added to: Σ_rows dout (LayerNorm; null for RMSNorm)
  const float* dout;      // the norm output's gradient
  const float* x;         // the norm's input
  const float* mean;      // per row (LayerNorm); null: RMSNorm, which does not centre
  const float* rstd;      // per row: 1/σ (LayerNorm), 1/rms (RMSNorm)
  const float* weight;    // γ
  int rows, C;
  float* partials;        // scratch: norm_backward_scratch_floats(C, centred) floats
  int* finished;          // scratch: one counter, 0 before the launch and left 0
};

// Whether the kernel takes the call: C a multiple of 4 up to 1024 (LayerNorm) or 2048 (RMSNorm),
// what a lane's registers hold, and dx, dout, x and weight 16-byte aligned.
bool norm_backward_supports(const NormBackwardArgs& args);

// Scratch floats a launch over C columns needs.
long norm_backward_scratch_floats(int C, bool centred);

// Queues the backward on `stream`.
void norm_backward(const NormBackwardArgs& args, cudaStream_t stream);

}  // namespace trident
