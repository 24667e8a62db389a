// SwiGLU, the gate of Llama's MLP: h = silu(gate) · up, elementwise, silu(g) = g · sigmoid(g). gate
// and up are the halves of one product's output (gate_proj and up_proj multiplied as one [2F, C]
// weight): each of `rows` rows holds F gate values, then F up values.
#pragma once

#include "kernels/gemm.hpp"

namespace trident {

// h[r, c] = silu(gate_up[r, c]) · gate_up[r, F + c]   (h: rows × F, in fp32 or bf16 as it is stored)
void swiglu_forward(ProductInput h, const float* gate_up, int rows, int F);

// The gradients w.r.t. gate and up, in the same layout: d_gate_up[r, c] = dh · up · silu'(gate),
// d_gate_up[r, F + c] = dh · silu(gate), in fp32 or bf16 as it is stored (only products read it).
// dh[r, c] sits at dh[r · dh_ld + c]; in fp32 it may be the gate half of d_gate_up itself (dh_ld =
// 2F), read before it is overwritten.
void swiglu_backward(ProductInput d_gate_up, const float* dh, long dh_ld, const float* gate_up, int rows, int F);

}  // namespace trident
