#include "kernels/attention.hpp"

#include <cmath>

#include "kernels/causal_softmax.hpp"

namespace trident {

namespace {

// The heads of one sequence as batches of products. With kv_heads = heads every head has its own
// k and v, and the H heads form one strided batch; with grouped-query attention the heads of a
// group share their k and v (batch stride 0), one batch per group.
struct HeadBatches {
  int groups, per_group;  // batches, and heads in each
  long kv_stride;         // between the k (and v) of consecutive heads of a batch
  explicit HeadBatches(const AttentionShape& s)
      : groups(s.kv_heads == s.heads ? 1 : s.kv_heads),
        per_group(s.heads / groups),
        kv_stride(s.kv_heads == s.heads ? s.head_dim : 0) {}
};

// Where sequence b's group g starts in q (or out), k (or v) and probs.
struct Group {
  long q, kv, out, probs;
  Group(const AttentionShape& s, const HeadBatches& batches, int b, int g)
      : q(b * s.T * s.q_ld + static_cast<long>(g) * batches.per_group * s.head_dim),
        kv(b * s.T * s.kv_ld + static_cast<long>(g) * s.head_dim),
        out(b * s.T * s.out_ld + static_cast<long>(g) * batches.per_group * s.head_dim),
        probs((static_cast<long>(b) * s.heads + static_cast<long>(g) * batches.per_group) * s.T * s.T) {}
};

// f(group) for every group of heads of every sequence.
template <class F>
void for_each_group(const AttentionShape& s, const HeadBatches& batches, const F& f) {
  for (int b = 0; b < s.B; ++b)
    for (int g = 0; g < batches.groups; ++g) f(Group(s, batches, b, g));
}

float score_scale(const AttentionShape& s) { return 1.0f / std::sqrt(static_cast<float>(s.head_dim)); }

// dk (or dv) of group g = Σ over its heads of scale · aᵀ · b: one product per head, accumulated.
// With kv_heads = heads each head is its own group and the H products form one batch.
void sum_over_group(GemmContext& context, const AttentionShape& s, const HeadBatches& batches, float scale,
                    const float* a, const float* b, long b_ld, float* c) {
  const long tt = static_cast<long>(s.T) * s.T;
  if (batches.kv_stride != 0) {
    gemm_strided_batched(context, true, false, s.T, s.head_dim, s.T, scale, a, s.T, tt, b, b_ld, s.head_dim, 0.0f, c,
                         s.kv_ld, batches.kv_stride, batches.per_group);
    return;
  }
  for (int h = 0; h < batches.per_group; ++h)
    gemm(context, true, false, s.T, s.head_dim, s.T, scale, a + h * tt, s.T, b + static_cast<long>(h) * s.head_dim,
         b_ld, h == 0 ? 0.0f : 1.0f, c, s.kv_ld);
}

}  // namespace

void attention_probabilities(GemmContext& context, float* probs, const float* q, const float* k,
                             const AttentionShape& s) {
  const HeadBatches batches(s);
  const int T = s.T, hd = s.head_dim, n = batches.per_group;
  const long tt = static_cast<long>(T) * T;
  for_each_group(s, batches, [&](const Group& at) {
    gemm_strided_batched(context, false, true, T, T, hd, score_scale(s), q + at.q, s.q_ld, hd, k + at.kv, s.kv_ld,
                         batches.kv_stride, 0.0f, probs + at.probs, T, tt, n);  // S = scale·Q·Kᵀ
  });
  causal_softmax_forward(probs, s.B * s.heads, T);
}

void attention_forward(GemmContext& context, float* out, float* probs, const float* q, const float* k, const float* v,
                       const AttentionShape& s) {
  const HeadBatches batches(s);
  const int T = s.T, hd = s.head_dim, n = batches.per_group;
  const long tt = static_cast<long>(T) * T;
  attention_probabilities(context, probs, q, k, s);
  for_each_group(s, batches, [&](const Group& at) {
    gemm_strided_batched(context, false, false, T, hd, T, 1.0f, probs + at.probs, T, tt, v + at.kv, s.kv_ld,
                         batches.kv_stride, 0.0f, out + at.out, s.out_ld, hd, n);  // O = P·V
  });
}

void attention_backward(GemmContext& context, float* dq, float* dk, float* dv, float* dprobs, const float* dout,
                        const float* q, const float* k, const float* v, const float* probs, const AttentionShape& s) {
  const HeadBatches batches(s);
  const int T = s.T, hd = s.head_dim, n = batches.per_group;
  const long tt = static_cast<long>(T) * T;
  for_each_group(s, batches, [&](const Group& at) {
    gemm_strided_batched(context, false, true, T, T, hd, 1.0f, dout + at.out, s.out_ld, hd, v + at.kv, s.kv_ld,
                         batches.kv_stride, 0.0f, dprobs + at.probs, T, tt, n);                        // dP = dO·Vᵀ
    sum_over_group(context, s, batches, 1.0f, probs + at.probs, dout + at.out, s.out_ld, dv + at.kv);  // dV = Σ Pᵀ·dO
  });
  causal_softmax_backward(dprobs, probs, s.B * s.heads, T);
  for_each_group(s, batches, [&](const Group& at) {
    gemm_strided_batched(context, false, false, T, hd, T, score_scale(s), dprobs + at.probs, T, tt, k + at.kv, s.kv_ld,
                         batches.kv_stride, 0.0f, dq + at.q, s.q_ld, hd, n);  // dQ = scale·dS·K
    sum_over_group(context, s, batches, score_scale(s), dprobs + at.probs, q + at.q, s.q_ld,
                   dk + at.kv);  // dK = scale·Σ dSᵀ·Q
  });
}

void attention_forward(GemmContext& context, float* out, float* probs, const float* qkv, int B, int T, int C, int H) {
  const AttentionShape shape{B, T, H, H, C / H, 3L * C, 3L * C, C};
  attention_forward(context, out, probs, qkv, qkv + C, qkv + 2 * C, shape);
}

void attention_probabilities(GemmContext& context, float* probs, const float* qkv, int B, int T, int C, int H) {
  const AttentionShape shape{B, T, H, H, C / H, 3L * C, 3L * C, C};
  attention_probabilities(context, probs, qkv, qkv + C, shape);
}

void attention_backward(GemmContext& context, float* dqkv, float* dprobs, const float* dout, const float* qkv,
                        const float* probs, int B, int T, int C, int H) {
  const AttentionShape shape{B, T, H, H, C / H, 3L * C, 3L * C, C};
  attention_backward(context, dqkv, dqkv + C, dqkv + 2 * C, dprobs, dout, qkv, qkv + C, qkv + 2 * C, probs, shape);
}

}  // namespace trident
