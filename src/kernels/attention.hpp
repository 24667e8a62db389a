// Causal multi-head self-attention, every product through gemm(). Grouped-query attention (Llama)
// is the general case: query head h reads key/value head ⌊h / (heads / kv_heads)⌋; GPT-2's
// multi-head attention is kv_heads = heads. Each token's q row holds its heads' head_dim columns
// one after the other (head h at columns h·hd), as do its k, v and output rows.
//
// Two kernels compute it (deck key train.attention), equal to float reassociation:
//   explicit  materialises the [B, H, T, T] probabilities, keeps them for backward, and multiplies
//             whole T × T blocks (attention.cpp);
//   tiled     flash-style: query and key tiles with an online softmax, the masked tiles skipped; it
//             keeps one log-sum-exp per row, and backward recomputes the tiles
//             (tiled_attention.cpp). Memory grows with T, not T².
#pragma once

#include <cstddef>

#include "deck/choices.hpp"
#include "kernels/document_mask.hpp"
#include "kernels/gemm.hpp"

namespace trident {

struct AttentionShape {
  int B, T, heads, kv_heads, head_dim;
  long q_ld, kv_ld, out_ld;  // floats between consecutive tokens' rows of q, of k and v, of out
  AttentionKernel kernel = AttentionKernel::tiled;
  DocumentMask documents = {};  // packed documents (null: the causal mask alone)
  // A chunk of queries against a chunk of keys of a longer sequence (context parallelism; tiled
  // kernel only): the T queries sit at positions query_offset.., the T keys at key_offset.., and the
  // causal mask and the documents' starts are in those positions. 0 and 0: the whole sequence.
  int query_offset = 0, key_offset = 0;
  // Backward adds the gradients into dq, dk and dv instead of overwriting them (one chunk pair's
  // share of them).
  bool accumulate_grads = false;

  // GPT-2's fused layout: qkv [B, T, 3C] holds the q, k and v blocks of C columns each (at qkv,
  // qkv + C, qkv + 2C); out [B, T, C].
  static AttentionShape fused_qkv(int B, int T, int C, int heads, AttentionKernel kernel) {
    return {B, T, heads, heads, C / heads, 3L * C, 3L * C, C, kernel};
  }
};

// This TP rank's heads of a micro-batch of B sequences (tp ranks share the heads), as the kernels
// size what they keep and their scratch; row strides play no part in sizes and are left 0.
inline AttentionShape attention_heads(const ModelConfig& cfg, int B, int tp) {
  return {B, cfg.seq_len, cfg.heads / tp, cfg.key_value_heads() / tp, cfg.head_dim(), 0, 0, 0, cfg.attention};
}

// The tiled kernel's tiles: kAttentionQueryTile queries against up to kAttentionKeyTile keys (fewer
// when T is shorter; a key tile also stops at its query tile's last position, the causal mask's
// edge). The key tile is a multiple of the query tile, so a query tile's key tiles all start at or
// before its first position. On a CPU, 128 queries keep a head's scores (128 × 512 floats, 256 KiB)
// in the L2 cache, and 512 keys give each product of a tile pair 4 times the work of a 128 × 128
// one, which a BLAS with several threads shares better: on 2 BLAS threads GPT-2's attention (T = 256
// to 2048) took 11-15% less time than with 128 keys, on one thread the same within 3%
// (bench/attention_kernels, medians of alternating runs).
// On a GPU every tile pair costs ten launches (seven products, three row kernels) whatever its
// size: with 128, GPT-2 124M at T = 1024, B = 8 makes about 34,000 a step (kokkos-tools' kernel
// timer counted the 10,368 row kernels on an H200, where the step took 249 ms against PyTorch's 74).
// Tiles of 1024 launch 36 times fewer there; their scratch (two [H, 1024, 1024] blocks) is reused
// by every layer, so what is kept for backward still grows with T, not T².
#ifdef TRIDENT_GPU_BUILD
inline constexpr int kAttentionQueryTile = 1024;
inline constexpr int kAttentionKeyTile = 1024;
#else
inline constexpr int kAttentionQueryTile = 128;
inline constexpr int kAttentionKeyTile = 512;
#endif
static_assert(kAttentionKeyTile % kAttentionQueryTile == 0, "a key tile spans whole query tiles");
constexpr int attention_query_tile(const AttentionShape& s) {
  return s.T < kAttentionQueryTile ? s.T : kAttentionQueryTile;
}
constexpr int attention_key_tile(const AttentionShape& s) { return s.T < kAttentionKeyTile ? s.T : kAttentionKeyTile; }
// Floats in one head's [query tile, key tile] block of scores.
constexpr long attention_tile_floats(const AttentionShape& s) {
  return static_cast<long>(attention_query_tile(s)) * attention_key_tile(s);
}

// What forward keeps for backward, in floats: the [B, H, T, T] probabilities (explicit) or the
// [B, H, T] log-sum-exp of each row's scores (tiled). The planner counts with it (plan/memory.cpp).
constexpr std::size_t attention_saved_floats(const AttentionShape& s) {
  const std::size_t rows = static_cast<std::size_t>(s.B) * s.heads * s.T;
  return s.kernel == AttentionKernel::tiled ? rows : rows * s.T;
}
// Scratch that forward and backward write, in floats: the gradient w.r.t. the probabilities
// [B, H, T, T] (explicit), or two [H, query tile, key tile] score tiles and a [B, H, T] row
// statistic (tiled: the CPU's kernel uses one sequence's [H, T] of it at a time, the GPU's fused
// kernel all of it).
constexpr std::size_t attention_scratch_floats(const AttentionShape& s) {
  const std::size_t tile = attention_tile_floats(s);
  return s.kernel == AttentionKernel::tiled ? static_cast<std::size_t>(s.heads) * 2 * tile + attention_saved_floats(s)
                                            : attention_saved_floats(s);
}

// out (head h at columns h·hd) = softmax_causal(q·kᵀ / √hd) · v per (b, h), the causal mask
// narrowed to each query's document under shape.documents; `saved` receives what
// backward reads (attention_saved_floats).
void attention_forward(GemmContext& context, float* out, float* saved, float* scratch, const float* q, const float* k,
                       const float* v, const AttentionShape& shape);

// dq, dk, dv (same layouts as q, k, v; overwritten) = gradient of Σ dout · out, from forward's
// inputs, its output and what it saved.
void attention_backward(GemmContext& context, float* dq, float* dk, float* dv, float* scratch, const float* dout,
                        const float* q, const float* k, const float* v, const float* out, const float* saved,
                        const AttentionShape& shape);

// Merges the attention of the same queries over two sets of keys (context parallelism's chunks):
// `out` and `log_sum_exp` (the tiled kernel's output and saved statistic over the first set) become
// those over both, given `part` and `part_log_sum_exp` over the second.
void attention_merge(float* out, float* log_sum_exp, const float* part, const float* part_log_sum_exp,
                     const AttentionShape& shape);

// The explicit kernel's `saved`, the probabilities softmax_causal(q·kᵀ / √hd), bit for bit as its
// forward writes them: selective recomputation rebuilds them in backward instead of stashing them.
void attention_probabilities(GemmContext& context, float* probs, const float* q, const float* k,
                             const AttentionShape& shape);

}  // namespace trident
