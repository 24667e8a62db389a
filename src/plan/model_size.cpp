#include "plan/model_size.hpp"

#include <string>

#include "common/error.hpp"

namespace trident {
namespace {

void require_heads_split_across_tp(const ModelConfig& model, int tp) {
  if (tp < 1 || model.heads % tp != 0) {
    throw InputError("model.heads = " + std::to_string(model.heads) + " does not split across parallel.tp = " +
                     std::to_string(tp) + ": tensor parallelism gives each rank whole heads, so " +
                     "parallel.tp must be a divisor of model.heads");
  }
}

std::int64_t layer_norm_params(std::int64_t width) { return 2 * width; }  // weight + bias

}  // namespace

std::int64_t padded_vocab(int vocab, int tp) {
  return (static_cast<std::int64_t>(vocab) + tp - 1) / tp * tp;
}

std::int64_t block_params(const ModelConfig& model, int tp) {
  require_heads_split_across_tp(model, tp);
  const std::int64_t c = model.d_model;
  const std::int64_t c_attn = (c * 3 * c + 3 * c) / tp;
  const std::int64_t attn_c_proj = c * c / tp + c;
  const std::int64_t c_fc = (c * 4 * c + 4 * c) / tp;
  const std::int64_t mlp_c_proj = 4 * c * c / tp + c;
  return layer_norm_params(c) + c_attn + attn_c_proj + layer_norm_params(c) + c_fc + mlp_c_proj;
}

std::int64_t non_embedding_params(const ModelConfig& model) {
  return model.layers * block_params(model) + layer_norm_params(model.d_model);
}

std::int64_t total_params(const ModelConfig& model) {
  const std::int64_t c = model.d_model;
  const std::int64_t wte = model.vocab * c;
  const std::int64_t wpe = model.seq_len * c;
  const std::int64_t untied_head = model.tie_embeddings ? 0 : wte;
  return wte + wpe + non_embedding_params(model) + untied_head;
}

StageParams stage_params(const ModelConfig& model, const StageLayers& stage, bool first_stage,
                         bool last_stage, int tp) {
  const std::int64_t c = model.d_model;
  const std::int64_t vocab_shard_rows = padded_vocab(model.vocab, tp) / tp;
  StageParams params;
  if (first_stage) params.embeddings = vocab_shard_rows * c + model.seq_len * c;
  params.blocks = stage.num_layers * block_params(model, tp);
  if (last_stage) {
    params.final_norm = layer_norm_params(c);
    const bool head_is_this_stages_wte = model.tie_embeddings && first_stage;
    if (!head_is_this_stages_wte) params.head = vocab_shard_rows * c;
  }
  return params;
}

double model_flops_per_step(const ModelConfig& model, std::int64_t tokens) {
  const double n = static_cast<double>(tokens);
  const double c = model.d_model;
  return 6.0 * static_cast<double>(non_embedding_params(model)) * n + 6.0 * model.vocab * c * n +
         6.0 * model.layers * model.seq_len * c * n;
}

}  // namespace trident
