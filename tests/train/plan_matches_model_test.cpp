// The planner's activation-memory formula must describe what the model really stashes, or
// `trident plan` misleads users sizing a run.
#include <gtest/gtest.h>

#include "model/activation_arena.hpp"
#include "plan/memory.hpp"

namespace trident {
namespace {

TEST(PlanMatchesModel, StashPerMicrobatchEqualsThePlannersFormula) {
  const ModelConfig shapes[] = {
      {.layers = 2, .d_model = 64, .heads = 4, .seq_len = 64, .vocab = 256},
      {.layers = 3, .d_model = 48, .heads = 6, .seq_len = 17, .vocab = 101},
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
       .tie_embeddings = false},
  };
  for (const ModelConfig& shape : shapes) {
    for (int micro_batch_size : {1, 3}) {
      for (int tp : {1, 2}) {
        const std::int64_t planned_floats =
            activation_floats_per_microbatch(shape, micro_batch_size, /*first_layer=*/0, shape.layers,
                                             /*first_stage=*/true, /*last_stage=*/true, tp);
        EXPECT_EQ(stash_bytes(shape, micro_batch_size, tp), static_cast<std::size_t>(planned_floats) * 4)
            << "L=" << shape.layers << " C=" << shape.d_model << " B=" << micro_batch_size << " tp=" << tp;
      }
    }
  }
}

}  // namespace
}  // namespace trident
