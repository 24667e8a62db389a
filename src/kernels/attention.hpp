// Causal multi-head self-attention on a fused qkv tensor, every product through gemm().
// qkv is [B, T, 3C]: the q, k and v blocks of C columns each, head h at columns h·hd .. h·hd + hd
// within each block (hd = C / H).
#pragma once

#include "kernels/gemm.hpp"

namespace trident {

// out [B, T, C] (head h at columns h·hd) = softmax_causal(q·kᵀ / √hd) · v per (b, h);
// probs [B, H, T, T] keeps the attention probabilities for the backward pass.
void attention_forward(GemmContext& context, float* out, float* probs, const float* qkv, int B, int T, int C, int H);

// dqkv [B, T, 3C] = gradient of Σ dout · out (overwrites); dprobs [B, H, T, T] is scratch.
void attention_backward(GemmContext& context, float* dqkv, float* dprobs, const float* dout, const float* qkv,
                        const float* probs, int B, int T, int C, int H);

}  // namespace trident
