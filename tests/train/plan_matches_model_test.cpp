// The planner's activation-memory formula must describe what the model really stashes, or
// `trident plan` misleads users sizing a run.
#include <gtest/gtest.h>

#include <string>

#include "model/activation_arena.hpp"
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
                const std::int64_t planned_floats = activation_floats_per_microbatch(
                    shape, micro_batch_size, chunk.first_layer, chunk.num_layers, chunk.embedding, chunk.head, tp,
                    {.keep_probabilities = !selective,
                     .sequence_parallel = sequence_parallel,
                     .bf16_product_inputs = bf16});
                const StashContent content = selective ? StashContent::without_probabilities : StashContent::all;
                EXPECT_EQ(stash_bytes(shape, micro_batch_size, tp, chunk, content, sequence_parallel, bf16),
                          static_cast<std::size_t>(planned_floats) * 4)
                    << where << (selective ? " selective" : "") << (sequence_parallel ? " sequence parallel" : "")
                    << (bf16 ? " bf16" : "");
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

}  // namespace
}  // namespace trident
