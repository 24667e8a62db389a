// The plan's parameter count per stage and TP rank (plan/model_size, used for memory and FLOPs
// before anything runs) against the tensors the model really registers for that stage.
#include <gtest/gtest.h>

#include <vector>

#include "model/transformer.hpp"
#include "plan/model_size.hpp"
#include "plan/partition.hpp"

namespace trident {
namespace {

ModelConfig shape(int layers, int d_model, int heads, int seq_len, int vocab) {
  ModelConfig model;
  model.layers = layers;
  model.d_model = d_model;
  model.heads = heads;
  model.seq_len = seq_len;
  model.vocab = vocab;
  return model;
}

// Elements one TP rank of pipeline stage `stage` (of `pp`) holds, as the model registers them.
std::int64_t registered_elements(const ModelConfig& model, int pp, int stage, int tp) {
  ParallelConfig parallel;
  parallel.pp = pp;
  const StageLayers layers = partition_layers(model, parallel)[stage];
  const ModelChunk chunk{layers.first_layer, layers.num_layers, stage == 0, stage == pp - 1};
  ParamStore params(0, tp);
  add_model_parameters(params, model, {chunk});
  return static_cast<std::int64_t>(params.total_size());
}

ModelConfig llama(int layers, int d_model, int heads, int kv_heads, int ffn_hidden, bool tied) {
  ModelConfig model = shape(layers, d_model, heads, 32, 1001);
  model.family = ModelFamily::llama;
  model.kv_heads = kv_heads;
  model.ffn_hidden = ffn_hidden;
  model.tie_embeddings = tied;
  return model;
}

TEST(PlanMatchesModel, EveryStageAndTpShardHoldsWhatThePlanCounts) {
  for (const ModelConfig& model : {shape(12, 768, 12, 1024, 50257), shape(5, 96, 6, 32, 1001),
                                   llama(5, 96, 6, 6, 192, false), llama(4, 96, 6, 6, 96, true)}) {
    for (int pp : {1, 2, 3}) {
      ParallelConfig parallel;
      parallel.pp = pp;
      const auto stages = partition_layers(model, parallel);
      for (int tp : {1, 2, 3, 6}) {
        for (int s = 0; s < pp; ++s) {
          const std::int64_t planned = stage_params(model, stages[s], s == 0, s == pp - 1, tp).total();
          EXPECT_EQ(planned, registered_elements(model, pp, s, tp))
              << model.layers << " layers, pp " << pp << " stage " << s << ", tp " << tp;
        }
      }
    }
  }
}

}  // namespace
}  // namespace trident
