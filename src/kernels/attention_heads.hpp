// What both attention kernels (attention.cpp, tiled_attention.cpp) share: how the heads of one
// sequence are batched into products, where each batch's operands start, and the sum over a group
// of query heads of their key/value gradients. Internal to the kernels.
#pragma once

#include <cmath>

#include "kernels/attention.hpp"

namespace trident::attention_detail {

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

// Where sequence b's group g starts: its first row in q (or out) and k (or v), and its first head
// among the B·H (b, head) pairs that the saved per-head tensors are indexed by.
struct Group {
  long q, kv, out, head;
  int sequence;  // b
  Group(const AttentionShape& s, const HeadBatches& batches, int b, int g)
      : q(b * s.T * s.q_ld + static_cast<long>(g) * batches.per_group * s.head_dim),
        kv(b * s.T * s.kv_ld + static_cast<long>(g) * s.head_dim),
        out(b * s.T * s.out_ld + static_cast<long>(g) * batches.per_group * s.head_dim),
        head(static_cast<long>(b) * s.heads + static_cast<long>(g) * batches.per_group),
        sequence(b) {}
};

// f(group) for every group of heads of every sequence.
template <class F>
void for_each_group(const AttentionShape& s, const HeadBatches& batches, const F& f) {
  for (int b = 0; b < s.B; ++b)
    for (int g = 0; g < batches.groups; ++g) f(Group(s, batches, b, g));
}

// The tiled kernels' [B, H, T] row statistic in their scratch (attention_scratch_floats), after the
// two score tiles.
inline float* row_statistics(float* scratch, const AttentionShape& s) {
  return scratch + 2L * s.heads * attention_tile_floats(s);
}

inline float score_scale(const AttentionShape& s) { return 1.0f / std::sqrt(static_cast<float>(s.head_dim)); }

// c = Σ over the batch's heads h of scale · a_hᵀ · b_h, added to c unless `overwrite`: a_h [rows,
// cols] at a + h·a_stride (leading dimension a_ld), b_h [rows, hd] at b + h·hd, c [cols, hd] in the
// k/v layout — dk or dv of a key block. With kv_heads = heads each head is its own group and the
// products form one batch; else one product per head, accumulated.
inline void sum_over_group(GemmContext& context, const AttentionShape& s, const HeadBatches& batches, int rows,
                           int cols, float scale, const float* a, int a_ld, long a_stride, const float* b, long b_ld,
                           bool overwrite, float* c) {
  if (batches.kv_stride != 0) {
    gemm_strided_batched(context, true, false, cols, s.head_dim, rows, scale, a, a_ld, a_stride, b, b_ld, s.head_dim,
                         overwrite ? 0.0f : 1.0f, c, s.kv_ld, batches.kv_stride, batches.per_group);
    return;
  }
  for (int h = 0; h < batches.per_group; ++h)
    gemm(context, true, false, cols, s.head_dim, rows, scale, a + h * a_stride, a_ld,
         b + static_cast<long>(h) * s.head_dim, b_ld, overwrite && h == 0 ? 0.0f : 1.0f, c, s.kv_ld);
}

}  // namespace trident::attention_detail

namespace trident::attention_detail {

// The tiled kernel (tiled_attention.cpp), as attention.hpp's entry points dispatch to it.
void tiled_forward(GemmContext& context, float* out, float* log_sum_exp, float* scratch, const float* q, const float* k,
                   const float* v, const AttentionShape& shape);
void tiled_backward(GemmContext& context, float* dq, float* dk, float* dv, float* scratch, const float* dout,
                    const float* q, const float* k, const float* v, const float* out, const float* log_sum_exp,
                    const AttentionShape& shape);

}  // namespace trident::attention_detail
