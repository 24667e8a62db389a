// A model family is one description (DESIGN.md "Model"): its tensors in Hugging Face's names, with
// their global shapes, how tensor parallelism splits them and how they start; its norm, MLP and
// positions, from which the parameter and FLOP counts, the activations a layer keeps and the norms'
// TP traffic follow; the deck keys only it reads. The model (tensors, names, initialisation), the
// deck's rules, the planner and the step-time model read the description, never the family's enum;
// the model's block type for it is model/families.hpp. A new family is a description file here
// (gpt2.cpp, llama.cpp show the form), one line in family.cpp's list, a block file in model/ and
// its tests. Pure C++: no MPI, no Kokkos.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "family/model_config.hpp"

namespace trident {

// LayerNorm: a weight and a bias, mean and rstd kept per row. RMSNorm: a weight, rstd kept per row.
enum class NormKind { layernorm, rmsnorm };
// gelu: one input product (c_fc) and GELU. swiglu: two input products (gate | up), silu(gate) · up.
enum class MlpKind { gelu, swiglu };
// How a tensor starts (model/init.hpp): N(0, 0.02); N(0, 0.02 / √(2·layers)) for a residual
// projection (GPT-2's c_proj); ones (norm weights); zeros (biases).
enum class TensorInit { normal, residual_normal, ones, zeros };

struct TensorSpec {
  std::string name;                 // Hugging Face's, without the model's prefix ("transformer.", "model.")
  std::vector<std::int64_t> shape;  // global, in Hugging Face's layout, unsharded and unpadded
  // The dimension tensor parallelism splits (-1: every TP rank holds the whole tensor), made of
  // shard_blocks equal blocks each split evenly (3 for GPT-2's q|k|v in c_attn).
  int shard_dim = -1;
  int shard_blocks = 1;
  TensorInit init = TensorInit::normal;
  int expert = -1;  // the expert of a mixture ([model.moe]) it belongs to; -1: none

  std::int64_t elements() const;
  // What one of `tp` ranks holds (a block's tensors divide evenly; the vocabulary's rows are padded,
  // model_size.hpp's padded_vocab).
  std::int64_t elements_per_rank(int tp) const { return shard_dim < 0 ? elements() : elements() / tp; }
};

// A field of a Hugging Face config.json as the model sets it, for importing published weights
// (train/hf_init): the field matches when config.json holds one of `values` (JSON texts, numbers
// compared as numbers) or, with at_least, a number no smaller than the last; a field config.json
// leaves out reads as `absent` (Hugging Face's default; "" when there is none, so it must be given).
struct HfConfigField {
  std::string key;                  // "n_layer"
  std::string deck_key;             // "model.layers", or what fixes it in words ("GPT-2's GELU")
  std::vector<std::string> values;  // "12", "1e-05", "silu", "false", "null" (strings unquoted)
  std::string absent;
  bool at_least = false;
};

struct FamilyDescription {
  ModelFamily family;
  std::string_view title;         // the plan's heading: "GPT-2"
  std::string_view hf_prefix;     // Hugging Face's state-dict prefix of every tensor but kUntiedHead
  std::string_view layer_prefix;  // a block's tensors are layer_prefix + layer + "." + name: "h."
  std::string_view embedding;     // the token embedding [V, C], vocab-parallel: "wte.weight"
  std::string_view positions;     // the learned position table [T, C]; empty: rotary positions in the blocks
  std::string_view final_norm;    // the final norm's name before ".weight" (and ".bias"): "ln_f"
  NormKind norm;
  MlpKind mlp;
  bool head_may_untie;            // model.tie_embeddings = false is allowed
  bool head_tied_by_default;      // model.tie_embeddings when the deck does not say
  std::span<const std::string_view> own_keys;  // [model] keys no other family reads
  std::string_view tp_split;      // how tensor parallelism splits the tensors, in words (the plan's)
  int (*default_mlp_hidden)(int d_model);
  // Block `layer`'s tensors, names without the layer's prefix, in the order the parameter buffer
  // keeps them (the fused products' parts adjacent: q, k, v; gate, up). A layer whose MLP is a
  // mixture of experts (ModelConfig::moe_layer) lists its router and experts instead of the MLP.
  std::vector<TensorSpec> (*block_tensors)(const ModelConfig& model, int layer);
  // config.json's fields for the model, model_type first (Hugging Face's architecture).
  std::vector<HfConfigField> (*hf_config)(const ModelConfig& model);

  bool rotary() const { return positions.empty(); }
  bool reads_key(std::string_view key) const;  // one of own_keys
};

// Every family, in the deck's order of words.
std::span<const FamilyDescription> families();
const FamilyDescription& family_description(ModelFamily family);
inline const FamilyDescription& family_of(const ModelConfig& model) { return family_description(model.family); }

// The untied head's weight [V, C], vocab-parallel like the embedding, the same name in every family.
inline constexpr std::string_view kUntiedHead = "lm_head.weight";

// "h.3." for layer 3 of GPT-2.
std::string layer_prefix(const FamilyDescription& family, int layer);
// Layer `layer`'s tensors with their full names.
std::vector<TensorSpec> layer_tensors(const ModelConfig& model, int layer);
// The tensors before the blocks (the embedding, and the position table where there is one) and
// after them (the final norm), with the untied head when the deck unties it.
std::vector<TensorSpec> input_tensors(const ModelConfig& model);
std::vector<TensorSpec> final_norm_tensors(const ModelConfig& model);
TensorSpec untied_head_tensor(const ModelConfig& model);

// Whether `name` is some family's token embedding (the tensor a tied head shares).
bool is_token_embedding(std::string_view name);

// Floats of one norm's parameters (C, and C more for a LayerNorm's bias), and the statistics it
// keeps per row for its backward.
std::int64_t norm_floats(const ModelConfig& model);
int norm_stats_per_row(const ModelConfig& model);
// The MLP's input products, each F wide: 1 (GELU's c_fc) or 2 (SwiGLU's gate and up).
int mlp_input_products(const ModelConfig& model);

}  // namespace trident
