#include "train/hf_init.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

#include "common/error.hpp"
#include "family/family.hpp"
#include "io/hf_weights.hpp"

namespace trident {

namespace {

std::optional<double> number_in(const std::string& text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool same_value(const std::string& a, const std::string& b) {
  const std::optional<double> x = number_in(a), y = number_in(b);
  if (x && y) return std::abs(*x - *y) <= 1e-6 * std::max(std::abs(*x), std::abs(*y));
  return a == b;
}

bool matches(const HfConfigField& field, const std::string& value) {
  if (std::ranges::any_of(field.values, [&](const std::string& v) { return same_value(v, value); })) return true;
  const std::optional<double> have = number_in(value), least = number_in(field.values.back());
  return field.at_least && have && least && *have >= *least;
}

// "model/h/0/attn/c_attn/weight" → "h.0.attn.c_attn.weight", trident's (prefix-less HF) name.
std::string tensor_name(const std::string& dataset) {
  std::string name = dataset.substr(dataset.find('/') + 1);
  std::ranges::replace(name, '/', '.');
  return name;
}

// The folder's key for a tensor: with the family's prefix, or without (a base model's state dict).
std::string folder_key(const HfWeights& weights, const FamilyDescription& family, const std::string& name,
                       const std::string& dir) {
  const std::string prefixed = name == kUntiedHead ? name : std::string(family.hf_prefix) + name;
  if (weights.contains(prefixed)) return prefixed;
  if (weights.contains(name)) return name;
  throw InputError(dir + ": no tensor " + prefixed + ", which the deck's model needs");
}

// The position table may have more rows than model.seq_len: read the first rows.
bool cut_positions(const FamilyDescription& family, const std::string& name, const std::vector<std::int64_t>& have,
                   const std::vector<std::int64_t>& need) {
  return name == family.positions && have.size() == 2 && need.size() == 2 && have[0] >= need[0] && have[1] == need[1];
}

}  // namespace

std::vector<std::string> hf_config_mismatches(const std::map<std::string, std::string>& config,
                                              const ModelConfig& model) {
  std::vector<std::string> lines;
  for (const HfConfigField& field : family_of(model).hf_config(model)) {
    const auto found = config.find(field.key);
    const std::string value = found != config.end() ? found->second : field.absent.empty() ? "(absent)" : field.absent;
    if (matches(field, value)) continue;
    lines.push_back(field.key + ": config.json " + value + ", deck " + field.deck_key + " " +
                    (field.at_least ? "needs at least " : "") + field.values.back());
    if (field.key == "model_type") break;  // the other fields are another architecture's
  }
  return lines;
}

std::string read_hf_folder(const std::string& dir, const ModelConfig& model, std::vector<TensorSlice>& slices) {
  const std::vector<std::string> problems = hf_config_mismatches(read_hf_config(dir), model);
  if (!problems.empty()) {
    std::string message = dir + "/config.json does not describe the deck's model:";
    for (const std::string& line : problems) message += "\n  " + line;
    throw InputError(message + "\nfix the deck's [model] or use the folder of the model it describes");
  }
  const HfWeights weights(dir);
  const FamilyDescription& family = family_of(model);
  std::int64_t elements = 0;
  for (TensorSlice& slice : slices) {  // every rank checks every tensor: all ranks fail alike
    const std::string name = tensor_name(slice.path);
    const std::string key = folder_key(weights, family, name, dir);
    const std::vector<std::int64_t> have = weights.shape(key);
    if (cut_positions(family, name, have, slice.global_shape)) slice.global_shape = have;
    if (have != slice.global_shape)
      throw InputError(dir + ": tensor " + key + " has shape " + format_shape(have) + ", the deck's model needs " +
                       format_shape(slice.global_shape));
    elements += element_count(slice.global_shape);
  }
  for (const TensorSlice& slice : slices) weights.read(folder_key(weights, family, tensor_name(slice.path), dir), slice);
  return std::to_string(slices.size()) + " tensors, " + std::to_string(elements) + " values, config.json matching";
}

}  // namespace trident
