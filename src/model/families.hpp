// What differs between the model families around their blocks (DESIGN.md "Model"): the block type
// and the names of the embedding, the position table, the final norm and the untied head. The
// model (transformer.cpp) is one composition over these.
#pragma once

#include <string_view>
#include <vector>

#include "deck/config.hpp"
#include "model/block.hpp"
#include "model/gpt2_block.hpp"
#include "model/llama_block.hpp"
#include "model/model_chunk.hpp"
#include "model/param_store.hpp"

namespace trident {

struct Gpt2Family {
  using Block = Gpt2Block;
  static constexpr bool rotary = false;  // positions come from the table
  static constexpr const char* embedding = "wte.weight";
  static constexpr const char* positions = "wpe.weight";  // the learned position table
  static constexpr const char* final_norm = "ln_f.weight";
  static constexpr const char* final_norm_bias = "ln_f.bias";
};

struct LlamaFamily {
  using Block = LlamaBlock;
  static constexpr bool rotary = true;
  static constexpr const char* embedding = "embed_tokens.weight";
  static constexpr const char* positions = nullptr;  // RoPE inside the blocks instead
  static constexpr const char* final_norm = "norm.weight";
  static constexpr const char* final_norm_bias = nullptr;
};

static_assert(TransformerBlock<Gpt2Family::Block> && TransformerBlock<LlamaFamily::Block>);

// The untied head's weight [V, C], vocab-parallel like the embedding, on the last stage only.
inline constexpr const char* kUntiedHead = "lm_head.weight";

// Whether `name` is a family's token embedding (the tensor a tied head shares).
inline bool is_token_embedding(std::string_view name) {
  return name == Gpt2Family::embedding || name == LlamaFamily::embedding;
}

// Adds to `params` (not yet allocated) the tensors `chunks` need, in model order, with their global
// shapes and how each is split across the TP ranks: the embedding on the first chunk (and on the
// last when the head is tied to it), the position table (GPT-2), the blocks, the final norm and
// the untied head.
void add_model_parameters(ParamStore& params, const ModelConfig& cfg, const std::vector<ModelChunk>& chunks);

}  // namespace trident
