#include "family/family.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <numeric>
#include <stdexcept>

#include "family/families_list.hpp"

namespace trident {

std::int64_t TensorSpec::elements() const {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

bool FamilyDescription::reads_key(std::string_view key) const {
  return std::find(own_keys.begin(), own_keys.end(), key) != own_keys.end();
}

std::span<const FamilyDescription> families() {
  static const std::array<FamilyDescription, 2> all{gpt2_family(), llama_family()};
  return all;
}

const FamilyDescription& family_description(ModelFamily family) {
  for (const FamilyDescription& description : families())
    if (description.family == family) return description;
  throw std::logic_error("family_description: a ModelFamily without a description");
}

int ModelConfig::moe_layers() const {
  int count = 0;
  for (int layer = 0; layer < layers; ++layer) count += moe_layer(layer) ? 1 : 0;
  return count;
}

int ModelConfig::mlp_hidden() const {
  return ffn_hidden > 0 ? ffn_hidden : family_description(family).default_mlp_hidden(d_model);
}

std::string layer_prefix(const FamilyDescription& family, int layer) {
  return std::string(family.layer_prefix) + std::to_string(layer) + ".";
}

std::vector<TensorSpec> layer_tensors(const ModelConfig& model, int layer) {
  const FamilyDescription& family = family_of(model);
  std::vector<TensorSpec> tensors = family.block_tensors(model, layer);
  const std::string prefix = layer_prefix(family, layer);
  for (TensorSpec& tensor : tensors) tensor.name.insert(0, prefix);
  return tensors;
}

std::vector<TensorSpec> input_tensors(const ModelConfig& model) {
  const FamilyDescription& family = family_of(model);
  constexpr int by_rows = 0;
  std::vector<TensorSpec> tensors = {{std::string(family.embedding), {model.vocab, model.d_model}, by_rows}};
  if (!family.rotary()) tensors.push_back({std::string(family.positions), {model.seq_len, model.d_model}});
  return tensors;
}

std::vector<TensorSpec> final_norm_tensors(const ModelConfig& model) {
  const std::string norm(family_of(model).final_norm);
  std::vector<TensorSpec> tensors = {{norm + ".weight", {model.d_model}, -1, 1, TensorInit::ones}};
  if (family_of(model).norm == NormKind::layernorm)
    tensors.push_back({norm + ".bias", {model.d_model}, -1, 1, TensorInit::zeros});
  return tensors;
}

TensorSpec untied_head_tensor(const ModelConfig& model) {
  constexpr int by_rows = 0;
  return {std::string(kUntiedHead), {model.vocab, model.d_model}, by_rows};
}

bool is_token_embedding(std::string_view name) {
  const auto families_list = families();
  return std::any_of(families_list.begin(), families_list.end(),
                     [&](const FamilyDescription& family) { return family.embedding == name; });
}

std::int64_t norm_floats(const ModelConfig& model) {
  return (family_of(model).norm == NormKind::layernorm ? 2 : 1) * std::int64_t{model.d_model};
}

int norm_stats_per_row(const ModelConfig& model) { return family_of(model).norm == NormKind::layernorm ? 2 : 1; }

int mlp_input_products(const ModelConfig& model) { return family_of(model).mlp == MlpKind::swiglu ? 2 : 1; }

}  // namespace trident
