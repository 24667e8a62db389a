// RMSNorm over the last dimension (Llama): out = x / sqrt(mean(x²) + eps) · weight, no bias, no
// mean subtraction.
#pragma once

namespace trident {

// rstd[r] = 1 / sqrt(mean(x[r, :]²) + eps) is saved for the backward pass.
void rmsnorm_forward(float* out, float* rstd, const float* x, const float* weight, float eps, int rows, int C);

// Accumulates (+=) into dx and dweight the gradients of Σ dout · out.
void rmsnorm_backward(float* dx, float* dweight, const float* dout, const float* x, const float* rstd,
                      const float* weight, int rows, int C);

}  // namespace trident
