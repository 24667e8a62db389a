// Counter-based initialisation: every value is a pure function of (seed, tensor name, element
// index within the full unsharded tensor). Nothing depends on allocation order or on which other
// tensors exist, so a tensor-parallel shard can fill its slice by global index and every grid
// starts from identical weights.
#pragma once

#include <cstdint>
#include <string_view>

#include "deck/config.hpp"
#include "model/param_store.hpp"

namespace trident {

// Standard normal sample for element `index` of tensor `name`.
float counter_normal(std::uint64_t seed, std::string_view name, std::uint64_t index);

// Each tensor as its family's description says (TensorSpec::init): weights N(0, 0.02) (Hugging
// Face's initializer_range for both families), residual projections N(0, 0.02 / √(2·layers)) (GPT-2's
// c_proj), biases 0, norm weights 1. A TP slice draws each element by its global index; padding is 0.
float init_std(const ModelConfig& cfg, TensorInit init);
void init_parameters(ParamStore& params, const ModelConfig& cfg, std::uint64_t seed);

}  // namespace trident
