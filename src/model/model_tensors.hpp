// Where a family's tensors live inside one flat buffer (ModelTensors), by the names of its
// description. Internal to the model module (transformer.cpp).
#pragma once

#include <vector>

#include "model/families.hpp"
#include "model/model_chunk.hpp"
#include "model/param_store.hpp"

namespace trident {

// Pointers to the model's tensors inside one flat buffer (the values, or the gradients): the
// embedding's and the head's where this rank holds them (else null), and the blocks by global
// layer (those held elsewhere left unset).
template <class Family>
struct ModelTensors {
  using Weights = typename Family::Block::Weights;
  ModelTensors(const FloatBuffer& buffer, const ParamStore& params, const std::vector<ModelChunk>& chunks, int layers)
      : blocks(layers) {
    const FamilyDescription& family = family_description(Family::family);
    auto at = [&](std::string_view name) -> float* {
      const ParamTensor* tensor = name.empty() ? nullptr : params.try_find(std::string(name));
      return tensor ? tensor->in(buffer) : nullptr;
    };
    const std::string norm(family.final_norm);
    embedding = at(family.embedding);
    positions = at(family.positions);
    final_norm = at(norm + ".weight");
    final_norm_bias = at(norm + ".bias");
    head = params.try_find(std::string(kUntiedHead)) ? at(kUntiedHead) : embedding;
    for (const ModelChunk& chunk : chunks)
      for (int layer = chunk.first_layer; layer < chunk.end_layer(); ++layer)
        blocks[layer] = Family::Block::tensors(buffer, params, layer_prefix(family, layer));
  }
  float *embedding = nullptr, *positions = nullptr, *final_norm = nullptr, *final_norm_bias = nullptr;
  float* head = nullptr;  // lm_head, or the embedding when tied
  std::vector<Weights> blocks;
};

}  // namespace trident
