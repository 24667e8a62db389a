// RMSNorm over the last dimension (Llama): out = x / sqrt(mean(x²) + eps) · weight, no bias, no
// mean subtraction.
#pragma once

#include "kernels/column_sums.hpp"
#include "kernels/gemm.hpp"
#include "kernels/norm_input.hpp"

namespace trident {

// rstd[r] = 1 / sqrt(mean(x[r, :]²) + eps) is saved for the backward pass. x may be a residual sum
// a + b, which is written out as it is read (kernels/norm_input.hpp). out is stored as it is kept
// (fp32, or bf16 bits where only products read it: kernels/gemm.hpp's ProductInput).
void rmsnorm_forward(ProductInput out, float* rstd, const NormInput& x, const float* weight, float eps, int rows, int C);

// Accumulates (+=) into dx and dweight the gradients of Σ dout · out, in one launch (the weight
// gradient summed over the rows as each row's dx is computed); scratch: of ColumnSumBuffers(1, C)
// or more.
void rmsnorm_backward(float* dx, float* dweight, const float* dout, const float* x, const float* rstd,
                      const float* weight, int rows, int C, const ColumnSumScratch& scratch);

}  // namespace trident
