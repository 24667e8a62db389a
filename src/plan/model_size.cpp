#include "plan/model_size.hpp"

#include <string>

#include "common/error.hpp"
#include "family/family.hpp"

namespace trident {
namespace {

void require_heads_split_across_tp(const ModelConfig& model, int tp) {
  if (tp < 1 || model.heads % tp != 0) {
    throw InputError("model.heads = " + std::to_string(model.heads) + " does not split across parallel.tp = " +
                     std::to_string(tp) + ": tensor parallelism gives each rank whole heads, so " +
                     "parallel.tp must be a divisor of model.heads");
  }
  // Whole kv heads and an equal share of the MLP's width too (GPT-2's follow from its heads).
  if (model.key_value_heads() % tp != 0 || model.mlp_hidden() % tp != 0) {
    throw InputError("model.kv_heads = " + std::to_string(model.key_value_heads()) +
                     " and model.ffn_hidden = " + std::to_string(model.mlp_hidden()) +
                     " must both split across parallel.tp = " + std::to_string(tp));
  }
}

}  // namespace

std::int64_t padded_vocab(int vocab, int tp) {
  return (static_cast<std::int64_t>(vocab) + tp - 1) / tp * tp;
}

std::int64_t block_params(const ModelConfig& model, int tp, int layer, int ep) {
  require_heads_split_across_tp(model, tp);
  std::int64_t params = 0;
  for (const TensorSpec& tensor : family_of(model).block_tensors(model, layer))
    if (tensor.expert < model.moe.experts / ep) params += tensor.elements_per_rank(tp);  // ep rank 0's experts
  return params;
}

// A mixture's experts that a token is not routed to: (experts - top_k) SwiGLU MLPs.
std::int64_t idle_expert_params(const ModelConfig& model, int layer) {
  if (!model.moe_layer(layer)) return 0;
  return std::int64_t{model.moe.experts - model.moe.top_k} * 3 * model.d_model * model.expert_hidden();
}

std::int64_t active_block_params(const ModelConfig& model, int layer) {
  return block_params(model, 1, layer) - idle_expert_params(model, layer);
}

double mean_active_block_params(const ModelConfig& model) {
  double sum = 0.0;
  for (int layer = 0; layer < model.layers; ++layer) sum += static_cast<double>(active_block_params(model, layer));
  return sum / model.layers;
}

std::int64_t non_embedding_params(const ModelConfig& model) {
  std::int64_t params = norm_floats(model);
  for (int layer = 0; layer < model.layers; ++layer) params += block_params(model, 1, layer);
  return params;
}

std::int64_t active_non_embedding_params(const ModelConfig& model) {
  std::int64_t params = non_embedding_params(model);
  for (int layer = 0; layer < model.layers; ++layer) params -= idle_expert_params(model, layer);
  return params;
}

std::int64_t position_params(const ModelConfig& model) {
  return family_of(model).rotary() ? 0 : std::int64_t{model.seq_len} * model.d_model;
}

std::int64_t total_params(const ModelConfig& model) {
  const std::int64_t wte = std::int64_t{model.vocab} * model.d_model;
  const std::int64_t untied_head = model.tie_embeddings ? 0 : wte;
  return wte + position_params(model) + non_embedding_params(model) + untied_head;
}

std::int64_t active_params(const ModelConfig& model) {
  return total_params(model) - (non_embedding_params(model) - active_non_embedding_params(model));
}

StageParams stage_params(const ModelConfig& model, const StageLayers& stage, bool first_stage,
                         bool last_stage, int tp, int ep) {
  const std::int64_t c = model.d_model;
  const std::int64_t vocab_shard_rows = padded_vocab(model.vocab, tp) / tp;
  StageParams params;
  if (first_stage) params.embeddings = vocab_shard_rows * c + position_params(model);
  for (int layer = stage.first_layer; layer < stage.end_layer(); ++layer)
    params.blocks += block_params(model, tp, layer, ep);
  if (last_stage) {
    params.final_norm = norm_floats(model);
    const bool head_is_this_stages_wte = model.tie_embeddings && first_stage;
    if (!head_is_this_stages_wte) params.head = vocab_shard_rows * c;
  }
  return params;
}

double model_flops_per_step(const ModelConfig& model, std::int64_t tokens) {
  const double n = static_cast<double>(tokens);
  const double c = model.d_model;
  return 6.0 * static_cast<double>(active_non_embedding_params(model)) * n + 6.0 * model.vocab * c * n +
         6.0 * model.layers * model.seq_len * c * n;
}

}  // namespace trident
