// Counter-based initialisation: every value is a pure function of (seed, tensor name, element
// index within the full unsharded tensor). Nothing depends on allocation order or on which other
// tensors exist, so a tensor-parallel shard can fill its slice by global index and every grid
// starts from identical weights.
#pragma once

#include <cstdint>
#include <string_view>

#include "model/param_store.hpp"

namespace trident {

// Standard normal sample for element `index` of tensor `name`.
float counter_normal(std::uint64_t seed, std::string_view name, std::uint64_t index);

// GPT-2's scheme: weights N(0, 0.02), the residual projections attn.c_proj.weight and
// mlp.c_proj.weight N(0, 0.02 / √(2·layers)), biases 0, LayerNorm weights 1. A TP slice draws each
// element by its global index; padding elements are 0.
float gpt2_init_std(std::string_view name, int layers);
void init_gpt2_parameters(ParamStore& params, int layers, std::uint64_t seed);

}  // namespace trident
