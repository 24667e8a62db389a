// The explicit kernel: whole T × T products per head and the probabilities kept; and the entry
// points that dispatch on the shape's kernel.
#include "kernels/attention.hpp"

#include <stdexcept>

#include "kernels/attention_heads.hpp"
#include "kernels/causal_softmax.hpp"
#include "kernels/fused_attention.hpp"

namespace trident {

using namespace attention_detail;

namespace {

long head_block(const AttentionShape& s) { return static_cast<long>(s.T) * s.T; }

void explicit_forward(GemmContext& context, float* out, float* probs, const float* v, const AttentionShape& s) {
  const HeadBatches batches(s);
  const int T = s.T, hd = s.head_dim;
  const long tt = head_block(s);
  for_each_group(s, batches, [&](const Group& at) {
    gemm_strided_batched(context, false, false, T, hd, T, 1.0f, probs + at.head * tt, T, tt, v + at.kv, s.kv_ld,
                         batches.kv_stride, 0.0f, out + at.out, s.out_ld, hd, batches.per_group);  // O = P·V
  });
}

void explicit_backward(GemmContext& context, float* dq, float* dk, float* dv, float* dprobs, const float* dout,
                       const float* q, const float* k, const float* v, const float* probs, const AttentionShape& s) {
  const HeadBatches batches(s);
  const int T = s.T, hd = s.head_dim, n = batches.per_group;
  const long tt = head_block(s);
  const float scale = score_scale(s);
  for_each_group(s, batches, [&](const Group& at) {
    gemm_strided_batched(context, false, true, T, T, hd, 1.0f, dout + at.out, s.out_ld, hd, v + at.kv, s.kv_ld,
                         batches.kv_stride, 0.0f, dprobs + at.head * tt, T, tt, n);  // dP = dO·Vᵀ
    sum_over_group(context, s, batches, T, T, 1.0f, probs + at.head * tt, T, tt, dout + at.out, s.out_ld, true,
                   dv + at.kv);  // dV = Σ Pᵀ·dO
  });
  causal_softmax_backward(dprobs, probs, s.B * s.heads, T, s.documents, s.heads);
  for_each_group(s, batches, [&](const Group& at) {
    gemm_strided_batched(context, false, false, T, hd, T, scale, dprobs + at.head * tt, T, tt, k + at.kv, s.kv_ld,
                         batches.kv_stride, 0.0f, dq + at.q, s.q_ld, hd, n);  // dQ = scale·dS·K
    sum_over_group(context, s, batches, T, T, scale, dprobs + at.head * tt, T, tt, q + at.q, s.q_ld, true,
                   dk + at.kv);  // dK = scale·Σ dSᵀ·Q
  });
}

// Chunks of a longer sequence and accumulated gradients are the tiled kernel's alone.
void require_whole_sequence(const AttentionShape& s) {
  if (s.query_offset != 0 || s.key_offset != 0 || s.accumulate_grads)
    throw std::invalid_argument("attention: chunk offsets and accumulated gradients need the tiled kernel");
}

}  // namespace

void attention_probabilities(GemmContext& context, float* probs, const float* q, const float* k,
                             const AttentionShape& s) {
  const HeadBatches batches(s);
  const int T = s.T, hd = s.head_dim;
  const long tt = head_block(s);
  for_each_group(s, batches, [&](const Group& at) {
    gemm_strided_batched(context, false, true, T, T, hd, score_scale(s), q + at.q, s.q_ld, hd, k + at.kv, s.kv_ld,
                         batches.kv_stride, 0.0f, probs + at.head * tt, T, tt, batches.per_group);  // S = scale·Q·Kᵀ
  });
  causal_softmax_forward(probs, s.B * s.heads, T, s.documents, s.heads);
}

void attention_forward(GemmContext& context, float* out, float* saved, float* scratch, const float* q, const float* k,
                       const float* v, const AttentionShape& s) {
  if (s.kernel == AttentionKernel::tiled) {
    if (!fused_forward(context, out, saved, q, k, v, s)) tiled_forward(context, out, saved, scratch, q, k, v, s);
    return;
  }
  require_whole_sequence(s);
  attention_probabilities(context, saved, q, k, s);
  explicit_forward(context, out, saved, v, s);
}

void attention_backward(GemmContext& context, float* dq, float* dk, float* dv, float* scratch, const float* dout,
                        const float* q, const float* k, const float* v, const float* out, const float* saved,
                        const AttentionShape& s) {
  if (s.kernel == AttentionKernel::tiled) {
    if (!fused_backward(context, dq, dk, dv, scratch, dout, q, k, v, out, saved, s))
      tiled_backward(context, dq, dk, dv, scratch, dout, q, k, v, out, saved, s);
    return;
  }
  require_whole_sequence(s);
  explicit_backward(context, dq, dk, dv, scratch, dout, q, k, v, saved, s);
}

}  // namespace trident
