// LayerNorm over the last dimension (eps 1e-5), as in GPT-2.
#pragma once

#include "kernels/column_sums.hpp"
#include "kernels/gemm.hpp"
#include "kernels/norm_input.hpp"

namespace trident {

inline constexpr float kLayerNormEps = 1e-5f;

// out[r, :] = (x[r, :] − mean[r]) · rstd[r] · weight + bias for each of `rows` rows of C;
// mean and rstd (1 / standard deviation) are saved for the backward pass. x may be a residual sum
// a + b, which is written out as it is read (kernels/norm_input.hpp). out is stored as it is kept
// (fp32, or bf16 bits where only products read it: kernels/gemm.hpp's ProductInput).
void layernorm_forward(ProductInput out, float* mean, float* rstd, const NormInput& x, const float* weight,
                       const float* bias, int rows, int C);

// Accumulates (+=) into dx, dweight and dbias the gradients of Σ dout · out, in one launch (the
// weight and bias gradients summed over the rows as each row's dx is computed); scratch: of
// ColumnSumBuffers(2, C).
void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* mean, const float* rstd, const float* weight, int rows, int C,
                        const ColumnSumScratch& scratch);

}  // namespace trident
