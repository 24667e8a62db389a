// The language-model head tied to the token embedding: logits = x · wteᵀ, no bias.
// Split like linear.hpp into input and weight gradients; both take the loss scale, applied
// through gemm's alpha so that no pass over the [rows, V] gradient is needed to scale it.
// The logits have a row stride ld ≥ V, so that a vocab-parallel rank computes only its real vocab
// ids' columns of a row padded to its share of the padded vocabulary.
#pragma once

#include "kernels/gemm.hpp"

namespace trident {

// logits[rows, V] = x[rows, C] · wte[V, C]ᵀ
void tied_head_forward(GemmContext& context, float* logits, Operand x, const float* wte, int rows, int C, int V,
                       int ld);

// dx[rows, C] = scale · dlogits · wte   (overwrites dx)
void tied_head_backward_input(GemmContext& context, float* dx, const float* dlogits, const float* wte, float scale,
                              int rows, int C, int V, int ld);

// dwte[V, C] += scale · dlogitsᵀ · x
void tied_head_backward_weight(GemmContext& context, float* dwte, const float* dlogits, Operand x, float scale,
                               int rows, int C, int V, int ld);

}  // namespace trident
