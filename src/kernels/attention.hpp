// Causal multi-head self-attention, every product through gemm(). Grouped-query attention (Llama)
// is the general case: query head h reads key/value head ⌊h / (heads / kv_heads)⌋; GPT-2's
// multi-head attention is kv_heads = heads. Each token's q row holds its heads' head_dim columns
// one after the other (head h at columns h·hd), as do its k, v and output rows.
#pragma once

#include "kernels/gemm.hpp"

namespace trident {

struct AttentionShape {
  int B, T, heads, kv_heads, head_dim;
  long q_ld, kv_ld, out_ld;  // floats between consecutive tokens' rows of q, of k and v, of out
};

// out (head h at columns h·hd) = softmax_causal(q·kᵀ / √hd) · v per (b, h); probs [B, H, T, T]
// keeps the attention probabilities for the backward pass.
void attention_forward(GemmContext& context, float* out, float* probs, const float* q, const float* k, const float* v,
                       const AttentionShape& shape);
// probs = softmax_causal(q·kᵀ / √hd), the first half of attention_forward, bit for bit: selective
// recomputation rebuilds the probabilities in backward instead of stashing them.
void attention_probabilities(GemmContext& context, float* probs, const float* q, const float* k,
                             const AttentionShape& shape);

// dq, dk, dv (same layouts as q, k, v; overwritten) = gradient of Σ dout · out; dprobs [B, H, T, T]
// is scratch.
void attention_backward(GemmContext& context, float* dq, float* dk, float* dv, float* dprobs, const float* dout,
                        const float* q, const float* k, const float* v, const float* probs,
                        const AttentionShape& shape);

// GPT-2's fused layout: qkv [B, T, 3C] holds the q, k and v blocks of C columns each; out [B, T, C].
void attention_forward(GemmContext& context, float* out, float* probs, const float* qkv, int B, int T, int C, int H);
void attention_backward(GemmContext& context, float* dqkv, float* dprobs, const float* dout, const float* qkv,
                        const float* probs, int B, int T, int C, int H);
void attention_probabilities(GemmContext& context, float* probs, const float* qkv, int B, int T, int C, int H);

}  // namespace trident
