// Fused causal attention on the GPU (FlashAttention-2's algorithm, our own CUDA kernels): one
// launch for forward, two for backward, the score tiles kept on chip (never in device memory), the
// masked tiles never computed, grouped-query heads read from their shared k and v. Products read
// bf16 (the inputs rounded to nearest, ties to even, as train.precision = "bf16" rounds every
// product's inputs) and accumulate in fp32 on the tensor cores; the softmax, its statistics and
// every output are fp32. Tensors keep kernels/attention.hpp's layouts (a token's heads side by
// side in its row, rows q_ld, kv_ld, out_ld floats apart), and forward saves what the Kokkos tiled
// kernel saves, one log-sum-exp per (sequence, head, position), so either backward can follow
// either forward. Backward is deterministic: no atomics (dQ and dK, dV are separate launches).
#pragma once

#include <cuda_runtime.h>

namespace trident {

struct FlashAttentionShape {
  int B, T, heads, kv_heads, head_dim;
  long q_ld, kv_ld, out_ld;  // floats between consecutive tokens' rows of q, of k and v, of out
};

// Whether the kernels take the shape: head_dim one of 16, 32, 64, 96, 128; heads a multiple of
// kv_heads; row strides multiples of 4 floats (the kernels load 16 bytes at a time).
bool flash_attention_supports(const FlashAttentionShape& shape);

// out = softmax_causal(q·kᵀ / √hd) · v; log_sum_exp[(b·heads + h)·T + t] = log Σ exp of the row's
// scaled scores. Pointers 16-byte aligned (std::invalid_argument otherwise). Queued on `stream`.
void flash_attention_forward(float* out, float* log_sum_exp, const float* q, const float* k, const float* v,
                             const FlashAttentionShape& shape, cudaStream_t stream);

// Backward is two launches, in this order: dq (overwritten) and output_dots[(b·heads + h)·T + t] =
// rowsum(dout ∘ out) (scratch of B·heads·T floats); then dk, dv (overwritten), which read the dots.
// Together: the gradients of Σ dout · out.
void flash_attention_query_grads(float* dq, float* output_dots, const float* dout, const float* q, const float* k,
                                 const float* v, const float* out, const float* log_sum_exp,
                                 const FlashAttentionShape& shape, cudaStream_t stream);
void flash_attention_key_grads(float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v,
                               const float* output_dots, const float* log_sum_exp, const FlashAttentionShape& shape,
                               cudaStream_t stream);

}  // namespace trident
