// Parameter counts and FLOPs of the models of DESIGN.md "Model". GPT-2: wte [V, C], wpe [T, C];
// per block ln_1, c_attn (C -> 3C), attn c_proj (C -> C), ln_2, c_fc (C -> F), mlp c_proj (F -> C),
// all with biases; ln_f; the head reuses wte. Llama: embed_tokens [V, C]; per block RMSNorm, q
// (C -> H·hd), k and v (C -> KV·hd), o (H·hd -> C), RMSNorm, gate and up (C -> F), down (F -> C),
// no biases; a final RMSNorm; lm_head [V, C] unless tie_embeddings.
#pragma once

#include <cstdint>

#include "deck/config.hpp"
#include "plan/partition.hpp"

namespace trident {

// Vocabulary rounded up to a multiple of tp, so the vocab-parallel wte splits into equal shards.
std::int64_t padded_vocab(int vocab, int tp);

// Unique parameters of the whole model: the tied head is counted once, the vocabulary unpadded.
std::int64_t total_params(const ModelConfig& model);
// Blocks + the final norm.
std::int64_t non_embedding_params(const ModelConfig& model);
// The same counting of a mixture's experts only the top_k that each token is routed to ([model.moe]):
// the parameters a token's forward multiplies by. Equal to the above for a dense model.
std::int64_t active_params(const ModelConfig& model);
std::int64_t active_non_embedding_params(const ModelConfig& model);  // the N of the FLOPs formula
// The learned position table: GPT-2's wpe [T, C]; none for Llama (RoPE).
std::int64_t position_params(const ModelConfig& model);

// Parameters of one transformer block held by one TP rank. Megatron split: c_attn and c_fc
// column-parallel (weight and bias split), both c_proj row-parallel (weight split, bias replicated),
// LayerNorms replicated; a mixture's router and experts replicated. tp = 1 gives the whole block.
// `layer`: which block (a mixture's layers hold more than the dense ones); ep: parallel.ep, over
// which a mixture's experts are split.
std::int64_t block_params(const ModelConfig& model, int tp = 1, int layer = 0, int ep = 1);
// Block `layer`'s parameters that one token's forward multiplies by, and their mean over the layers.
std::int64_t active_block_params(const ModelConfig& model, int layer);
double mean_active_block_params(const ModelConfig& model);

// What one rank of a stage stores, split by role.
struct StageParams {
  std::int64_t embeddings = 0;  // first stage: wte shard (V padded / tp rows) + wpe (replicated, GPT-2)
  std::int64_t blocks = 0;
  std::int64_t final_norm = 0;  // last stage: ln_f or norm (replicated)
  // Last stage: the head weight when it is not the wte of this same stage, i.e. an untied head, or
  // the tied head's second copy of wte when pp > 1 (its gradient is summed with stage 0's).
  std::int64_t head = 0;

  std::int64_t total() const { return embeddings + blocks + final_norm + head; }
};

// tp = 1: the whole stage; tp > 1: one TP shard of it. Throws InputError naming model.heads and
// parallel.tp when the heads do not split evenly across tp.
StageParams stage_params(const ModelConfig& model, const StageLayers& stage, bool first_stage,
                         bool last_stage, int tp = 1, int ep = 1);

// Model FLOPs of one training step (forward + backward), the one formula trident uses everywhere
// (plan, progress line, MFU, benchmarks):
//   FLOPs = 6 * N_nonembedding * tokens  (N: the active parameters of a mixture) + 6 * V * C * tokens + 6 * L * T * C * tokens
// with tokens = global batch tokens = micro_batch_size * microbatches * dp * seq_len, i.e.
//   6*N*B*T + 6*V*C*B*T + 6*L*B*T^2*C  for B sequences of T tokens.
// The terms: matmuls with the block weights, the head (logits), and attention scores/values with
// the causal mask halving the T x T work. V is the real vocabulary (padding does no useful work).
double model_flops_per_step(const ModelConfig& model, std::int64_t tokens);

}  // namespace trident
