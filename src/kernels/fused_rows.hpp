// Row kernels written in CUDA beside their Kokkos versions, where Kokkos cannot say what makes them
// fast (a lane's sums held in registers across rows, 16-byte loads, a running maximum merged across
// a warp): the norms' backward (gpu/norm_backward.hpp) and softmax cross-entropy
// (gpu/cross_entropy.hpp), behind layernorm.hpp's, rmsnorm.hpp's and cross_entropy.hpp's entry
// points as fused_attention.hpp is behind attention's. The GPU build links fused_rows_cuda.cpp, the
// CPU build fused_rows_none.cpp (never fused). Where these return false the Kokkos kernel runs.
#pragma once

#include "kernels/column_sums.hpp"

namespace trident::fused_rows {

// A norm's backward when the CUDA kernel takes the call (a null `mean`: RMSNorm; a null `dbias`:
// none wanted); returns whether it ran. `scratch` as the Kokkos kernel takes it.
bool norm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x, const float* mean,
                   const float* rstd, const float* weight, int rows, int C, const ColumnSumScratch& scratch);

// softmax_cross_entropy when the CUDA kernel takes the call; returns whether it ran.
bool cross_entropy(float* logits, float* losses, const int* targets, int rows, int V, double* loss_sum);

}  // namespace trident::fused_rows
