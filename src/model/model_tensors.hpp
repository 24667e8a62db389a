// Where a family's tensors live: the parameters a model's chunks register (add_family_parameters,
// in the order the checkpoint and the flat buffer keep them) and pointers to them inside one flat
// buffer (ModelTensors). Internal to the model module (transformer.cpp).
#pragma once

#include <vector>

#include "model/families.hpp"
#include "model/model_chunk.hpp"
#include "model/param_store.hpp"

namespace trident {

template <class Family>
void add_family_parameters(ParamStore& params, const ModelConfig& cfg, const std::vector<ModelChunk>& chunks) {
  constexpr int by_rows = 0;
  bool embedding = false, head = false;
  for (const ModelChunk& chunk : chunks) embedding |= chunk.embedding, head |= chunk.head;
  if (embedding || (head && cfg.tie_embeddings)) params.add(Family::embedding, {cfg.vocab, cfg.d_model}, by_rows);
  if (embedding && Family::positions) params.add(Family::positions, {cfg.seq_len, cfg.d_model});
  for (const ModelChunk& chunk : chunks)
    for (int layer = chunk.first_layer; layer < chunk.end_layer(); ++layer)
      Family::Block::add_parameters(params, cfg, layer);
  if (!head) return;
  params.add(Family::final_norm, {cfg.d_model});
  if (Family::final_norm_bias) params.add(Family::final_norm_bias, {cfg.d_model});
  if (!cfg.tie_embeddings) params.add(kUntiedHead, {cfg.vocab, cfg.d_model}, by_rows);
}


// Pointers to the model's tensors inside one flat buffer (the values, or the gradients): the
// embedding's and the head's where this rank holds them (else null), and the blocks by global
// layer (those held elsewhere left unset).
template <class Family>
struct ModelTensors {
  using Weights = typename Family::Block::Weights;
  ModelTensors(const FloatBuffer& buffer, const ParamStore& params, const std::vector<ModelChunk>& chunks, int layers)
      : blocks(layers) {
    auto at = [&](const char* name) -> float* {
      const ParamTensor* tensor = name ? params.try_find(name) : nullptr;
      return tensor ? tensor->in(buffer) : nullptr;
    };
    embedding = at(Family::embedding);
    positions = at(Family::positions);
    final_norm = at(Family::final_norm);
    final_norm_bias = at(Family::final_norm_bias);
    head = params.try_find(kUntiedHead) ? at(kUntiedHead) : embedding;
    for (const ModelChunk& chunk : chunks)
      for (int layer = chunk.first_layer; layer < chunk.end_layer(); ++layer)
        blocks[layer] = Family::Block::tensors(buffer, params, layer);
  }
  float *embedding = nullptr, *positions = nullptr, *final_norm = nullptr, *final_norm_bias = nullptr;
  float* head = nullptr;  // lm_head, or the embedding when tied
  std::vector<Weights> blocks;
};

}  // namespace trident
