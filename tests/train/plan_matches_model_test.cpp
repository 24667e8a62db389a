// The planner's activation-memory formula must describe what the model really stashes, or
// `trident plan` misleads users sizing a run.
#include <gtest/gtest.h>

#include <string>

#include "model/activation_arena.hpp"
#include "model/moe_mlp.hpp"
#include "plan/memory.hpp"

namespace trident {
namespace {

TEST(PlanMatchesModel, StashPerMicrobatchEqualsThePlannersFormula) {
  const ModelConfig shapes[] = {
      {.layers = 2, .d_model = 64, .heads = 4, .seq_len = 64, .vocab = 256},
      {.layers = 3,
       .d_model = 48,
       .heads = 6,
       .seq_len = 17,
       .vocab = 101,
       .attention = AttentionKernel::explicit_probabilities},  // the others: tiled attention
      {.layers = 12, .d_model = 768, .heads = 12, .seq_len = 256, .vocab = 50304},
      // Llama: grouped-query attention, SwiGLU, RMSNorm (rstd only), untied head.
      {.family = ModelFamily::llama,
       .layers = 2,
       .d_model = 64,
       .heads = 4,
       .seq_len = 64,
       .vocab = 256,
       .kv_heads = 2,
       .ffn_hidden = 96,
       .tie_embeddings = false},
      {.family = ModelFamily::llama,
       .layers = 3,
       .d_model = 96,
       .heads = 6,
       .seq_len = 17,
       .vocab = 101,
       .kv_heads = 6,
       .tie_embeddings = false,
       .attention = AttentionKernel::explicit_probabilities},
      // [model.moe]: layers 0 and 2 mixtures, layer 1 dense, the experts narrower than the dense MLP.
      {.family = ModelFamily::llama,
       .layers = 3,
       .d_model = 64,
       .heads = 4,
       .seq_len = 64,
       .vocab = 256,
       .kv_heads = 2,
       .ffn_hidden = 96,
       .tie_embeddings = false,
       .moe = {.experts = 4, .top_k = 2, .expert_ffn_hidden = 40, .layer_freq = 2}},
      // Every layer a mixture; odd widths, so that bf16's rounding to 16-byte groups shows.
      {.family = ModelFamily::llama,
       .layers = 3,
       .d_model = 48,
       .heads = 6,
       .seq_len = 17,
       .vocab = 101,
       .kv_heads = 2,
       .ffn_hidden = 80,
       .tie_embeddings = false,
       .attention = AttentionKernel::explicit_probabilities,
       .moe = {.experts = 5, .top_k = 3, .expert_ffn_hidden = 37, .layer_freq = 1}},
      // Experts split over ep = 2 (4 of them), capped by a capacity.
      {.family = ModelFamily::llama,
       .layers = 2,
       .d_model = 32,
       .heads = 4,
       .seq_len = 16,
       .vocab = 64,
       .kv_heads = 2,
       .tie_embeddings = false,
       .moe = {.experts = 4, .top_k = 2, .expert_ffn_hidden = 24, .layer_freq = 1, .capacity_factor = 1.5}},
  };
  for (const ModelConfig& shape : shapes) {
    const int L = shape.layers;
    // The whole model, a first, a middle and a last pipeline stage.
    const ModelChunk chunks[] = {{0, L, true, true}, {0, 1, true, false}, {1, L - 2, false, false}, {L - 1, 1, false, true}};
    for (const ModelChunk& chunk : chunks) {
      for (int micro_batch_size : {1, 3}) {
        for (int tp : {1, 2}) {
          const std::string where = "L=" + std::to_string(L) + " C=" + std::to_string(shape.d_model) + " chunk [" +
                                    std::to_string(chunk.first_layer) + ", +" + std::to_string(chunk.num_layers) +
                                    ") B=" + std::to_string(micro_batch_size) + " tp=" + std::to_string(tp);
          for (const bool selective : {false, true}) {
            for (const bool sequence_parallel : {false, true}) {
              for (const bool bf16 : {false, true}) {
                if (sequence_parallel && shape.seq_len % tp != 0) continue;  // the deck rule
                if (sequence_parallel && shape.moe.experts > 0) continue;    // rejected with [model.moe]
                for (const int ep : {1, 2}) {
                  if (ep > 1 && (shape.moe.experts == 0 || shape.moe.experts % ep != 0)) continue;
                  const std::int64_t planned_floats = activation_floats_per_microbatch(
                      shape, micro_batch_size, chunk.first_layer, chunk.num_layers, chunk.embedding, chunk.head, tp,
                      {.keep_probabilities = !selective,
                       .sequence_parallel = sequence_parallel,
                       .bf16_product_inputs = bf16,
                       .expert_ranks = ep});
                  const StashContent content = selective ? StashContent::without_probabilities : StashContent::all;
                  EXPECT_EQ(stash_bytes(shape, micro_batch_size, tp, chunk, content, sequence_parallel, bf16, ep),
                            static_cast<std::size_t>(planned_floats) * 4)
                      << where << (selective ? " selective" : "") << (sequence_parallel ? " sequence parallel" : "")
                      << (bf16 ? " bf16" : "") << " ep=" << ep;
                }
              }
            }
          }
          EXPECT_EQ(stash_bytes(shape, micro_batch_size, tp, chunk, StashContent::inputs),
                    4 * static_cast<std::size_t>(recompute_floats_per_microbatch(shape, micro_batch_size,
                                                                                 chunk.embedding, chunk.head)))
              << where << " recompute full";
        }
      }
    }
  }
}

// The plan's workspace counts what a mixture's MoeContext allocates: the difference [model.moe]
// makes to workspace_floats is the context's buffers, whatever the rows.
TEST(PlanMatchesModel, MixtureWorkspaceEqualsTheContextsBuffers) {
  const ModelConfig model{.family = ModelFamily::llama,
                          .layers = 3,
                          .d_model = 48,
                          .heads = 6,
                          .seq_len = 17,
                          .vocab = 101,
                          .ffn_hidden = 80,
                          .moe = {.experts = 5, .top_k = 3, .expert_ffn_hidden = 37, .layer_freq = 2}};
  ModelConfig dense = model;
  dense.moe = {};
  for (int micro_batch_size : {1, 3}) {
    const MoeContext context(model, static_cast<std::size_t>(micro_batch_size) * model.seq_len);
    const std::size_t allocated = context.d_gate_up.extent(0) + context.d_assigned.extent(0) +
                                  context.d_logits.extent(0) + context.d_weights.extent(0) +
                                  context.tokens_per_expert.extent(0);
    for (int tp : {1, 2}) {
      const std::int64_t added =
          workspace_floats(model, micro_batch_size, tp, false) - workspace_floats(dense, micro_batch_size, tp, false);
      EXPECT_EQ(added, static_cast<std::int64_t>(allocated)) << "B=" << micro_batch_size << " tp=" << tp;
    }
  }
}

}  // namespace
}  // namespace trident
