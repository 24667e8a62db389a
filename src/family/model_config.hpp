// The model a deck describes (its [model] section): the family, the shapes, and how attention is
// computed. What each family makes of these numbers (tensors, norms, MLP, positions) is its
// description, family/family.hpp.
#pragma once

#include <array>

#include "common/choice.hpp"

namespace trident {

// model.family: GPT-2 (LayerNorm, learned positions, GELU MLP, tied head) or Llama (RMSNorm, RoPE,
// grouped-query attention, SwiGLU MLP, untied head by default), DESIGN.md "Model"; each described
// once in family/<name>.cpp.
enum class ModelFamily { gpt2, llama };
inline constexpr std::array<Choice<ModelFamily>, 2> kModelFamilies{
    {{ModelFamily::gpt2, "gpt2"}, {ModelFamily::llama, "llama"}}};
constexpr const auto& choices(ModelFamily) { return kModelFamilies; }

// model.attention: how attention is computed (kernels/attention.hpp). tiled: flash-style tiles with
// an online softmax, memory linear in T; explicit: the T × T probabilities materialised and kept.
enum class AttentionKernel { tiled, explicit_probabilities };
inline constexpr std::array<Choice<AttentionKernel>, 2> kAttentionKernels{
    {{AttentionKernel::tiled, "tiled"}, {AttentionKernel::explicit_probabilities, "explicit"}}};
constexpr const auto& choices(AttentionKernel) { return kAttentionKernels; }

// [model.moe] (Llama family): a mixture of experts in place of the MLP of every layer_freq-th
// layer, as Hugging Face's MixtralSparseMoeBlock: a router (a linear layer computed in fp32) picks
// top_k of `experts` SwiGLU MLPs per token, weighted by its softmax renormalised over the k chosen.
struct MoeConfig {
  int experts = 0;              // 0: no mixture, every MLP dense
  int top_k = 2;                // experts per token
  int expert_ffn_hidden = 0;    // each expert's hidden width; 0: model.ffn_hidden's
  int layer_freq = 1;           // layer i is a mixture when i % layer_freq == 0 (Megatron's moe_layer_freq)
  double aux_loss_coef = 0.001;  // the load-balancing loss's weight (HF's router_aux_loss_coef)
  double capacity_factor = 0.0;  // 0: dropless; else each expert takes at most ⌈factor · tokens · k / experts⌉
};

struct ModelConfig {
  ModelFamily family = ModelFamily::gpt2;
  int layers = 2;
  int d_model = 64;
  int heads = 4;
  int seq_len = 64;
  int vocab = 256;  // real vocabulary size, unpadded
  // Keys of some families only (FamilyDescription::own_keys; a deck of another family may not set
  // them). 0 means the family's own value: see key_value_heads() and mlp_hidden().
  int kv_heads = 0;              // key/value heads; fewer than heads: grouped-query attention
  int ffn_hidden = 0;            // MLP hidden width (GPT-2: c_fc's outputs; Llama: gate and up outputs)
  double rope_theta = 500000.0;  // RoPE base
  double norm_eps = 1e-5;        // RMSNorm epsilon (GPT-2's LayerNorm: 1e-5 always)
  bool tie_embeddings = true;    // the deck makes it false for Llama unless given
  // How attention is computed (as Hugging Face's attn_implementation): the same function either
  // way, to float reassociation; tiled keeps memory linear in seq_len (kernels/attention.hpp).
  AttentionKernel attention = AttentionKernel::tiled;
  MoeConfig moe = {};

  int head_dim() const { return d_model / heads; }
  int key_value_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  // model.ffn_hidden, or the family's width for d_model (family/family.hpp).
  int mlp_hidden() const;
  // Whether layer `layer`'s MLP is a mixture of experts, their count there (0: a dense MLP), and
  // each expert's hidden width.
  bool moe_layer(int layer) const { return moe.experts > 0 && layer % moe.layer_freq == 0; }
  int experts_in(int layer) const { return moe_layer(layer) ? moe.experts : 0; }
  int expert_hidden() const { return moe.expert_ffn_hidden > 0 ? moe.expert_ffn_hidden : mlp_hidden(); }
  int moe_layers() const;  // how many layers are mixtures
};

}  // namespace trident
