// Llama (Touvron et al. 2023; Llama 3, as Hugging Face's LlamaForCausalLM): RMSNorm, rotary
// positions, grouped-query attention, SwiGLU MLP, no biases, an untied head unless the deck ties
// it. nn.Linear weights are [out, in].
#include <charconv>
#include <string>

#include "family/families_list.hpp"

namespace trident {

namespace {

constexpr std::string_view kLlamaKeys[] = {"kv_heads", "ffn_hidden", "rope_theta", "norm_eps", "moe"};

// A mixture's router and experts (Mixtral's names), in place of the dense MLP. Every TP rank holds
// all of them: the experts are not split. Each expert's w1 (gate) and w3 (up) lie adjacent, one
// product's [2F, C] weight as gate | up, then w2 (down); the experts one after the other.
void add_mixture_tensors(std::vector<TensorSpec>& tensors, const ModelConfig& model) {
  const std::int64_t c = model.d_model, f = model.expert_hidden();
  tensors.push_back({"block_sparse_moe.gate.weight", {model.moe.experts, c}});
  for (int expert = 0; expert < model.moe.experts; ++expert) {
    const std::string name = "block_sparse_moe.experts." + std::to_string(expert) + ".";
    tensors.push_back({name + "w1.weight", {f, c}, -1, 1, TensorInit::normal, expert});
    tensors.push_back({name + "w3.weight", {f, c}, -1, 1, TensorInit::normal, expert});
    tensors.push_back({name + "w2.weight", {c, f}, -1, 1, TensorInit::normal, expert});
  }
}

std::vector<TensorSpec> llama_block_tensors(const ModelConfig& model, int layer) {
  const std::int64_t c = model.d_model, hd = model.head_dim(), f = model.mlp_hidden();
  const std::int64_t q = model.heads * hd, kv = model.key_value_heads() * hd;
  constexpr int by_rows = 0, by_columns = 1;
  const TensorInit ones = TensorInit::ones;
  // q, k, v (by heads) and gate, up column-parallel, each group one product's weight; o_proj and
  // down_proj row-parallel.
  std::vector<TensorSpec> tensors = {{"input_layernorm.weight", {c}, -1, 1, ones},
                                     {"self_attn.q_proj.weight", {q, c}, by_rows},
                                     {"self_attn.k_proj.weight", {kv, c}, by_rows},
                                     {"self_attn.v_proj.weight", {kv, c}, by_rows},
                                     {"self_attn.o_proj.weight", {c, q}, by_columns},
                                     {"post_attention_layernorm.weight", {c}, -1, 1, ones}};
  if (model.moe_layer(layer)) {
    add_mixture_tensors(tensors, model);
    return tensors;
  }
  tensors.push_back({"mlp.gate_proj.weight", {f, c}, by_rows});
  tensors.push_back({"mlp.up_proj.weight", {f, c}, by_rows});
  tensors.push_back({"mlp.down_proj.weight", {c, f}, by_columns});
  return tensors;
}

// 2/3 of 4·d_model rounded up to a multiple of 256 (Meta's rule).
int llama_mlp_hidden(int d_model) {
  const long hidden = (8L * d_model + 2) / 3;
  return static_cast<int>((hidden + 255) / 256 * 256);
}

std::string real(double value) {  // the shortest text that reads back as value: 1e-06, 500000
  char text[32];
  return std::string(text, std::to_chars(text, text + sizeof text, value).ptr);
}

// LlamaConfig, or MixtralConfig for a mixture in every layer (whose defaults differ). trident's
// RoPE is unscaled and its attention sees every earlier token.
std::vector<HfConfigField> llama_hf_config(const ModelConfig& model) {
  const auto number = [](int value) { return std::to_string(value); };
  const bool mixtral = model.moe.experts > 0;
  std::vector<HfConfigField> fields{
      {"model_type", "model.family and [model.moe]", {mixtral ? "mixtral" : "llama"}, ""},
      {"num_hidden_layers", "model.layers", {number(model.layers)}, ""},
      {"hidden_size", "model.d_model", {number(model.d_model)}, ""},
      {"num_attention_heads", "model.heads", {number(model.heads)}, ""},
      {"num_key_value_heads", "model.kv_heads", {number(model.key_value_heads())}, number(model.heads)},
      {"head_dim", "model.d_model / model.heads", {number(model.head_dim())}, number(model.head_dim())},
      {"vocab_size", "model.vocab", {number(model.vocab)}, ""},
      {"rope_theta", "model.rope_theta", {real(model.rope_theta)}, mixtral ? "1e6" : "10000"},
      {"rms_norm_eps", "model.norm_eps", {real(model.norm_eps)}, mixtral ? "1e-05" : "1e-06"},
      {"tie_word_embeddings", "model.tie_embeddings", {model.tie_embeddings ? "true" : "false"}, "false"},
      {"hidden_act", "SwiGLU's SiLU", {"silu"}, "silu"},
      {"attention_bias", "no attention bias", {"false"}, "false"},
      {"rope_scaling", "plain RoPE (trident has no RoPE scaling)", {"null"}, "null"},
      {"sliding_window", "model.seq_len (attention to every earlier token)", {"null", number(model.seq_len)}, "null",
       true}};
  if (!mixtral) {
    fields.push_back({"intermediate_size", "model.ffn_hidden", {number(model.mlp_hidden())}, ""});
    fields.push_back({"mlp_bias", "no MLP bias", {"false"}, "false"});
    return fields;
  }
  fields.push_back({"intermediate_size", "model.moe.expert_ffn_hidden", {number(model.expert_hidden())}, ""});
  fields.push_back({"num_local_experts", "model.moe.experts", {number(model.moe.experts)}, ""});
  fields.push_back({"num_experts_per_tok", "model.moe.top_k", {number(model.moe.top_k)}, "2"});
  fields.push_back({"(a mixture in every layer)", "model.moe.layer_freq", {number(model.moe.layer_freq)}, "1"});
  return fields;
}

}  // namespace

const FamilyDescription& llama_family() {
  static const FamilyDescription family{
      .family = ModelFamily::llama,
      .title = "Llama",
      .hf_prefix = "model.",
      .layer_prefix = "layers.",
      .embedding = "embed_tokens.weight",
      .positions = "",
      .final_norm = "norm",
      .norm = NormKind::rmsnorm,
      .mlp = MlpKind::swiglu,
      .head_may_untie = true,
      .head_tied_by_default = false,
      .own_keys = kLlamaKeys,
      .tp_split = "q, k, v (by heads), gate and up split by output features, o_proj and down_proj by\n"
                  "input features, embed_tokens and lm_head by vocabulary rows, RMSNorms replicated",
      .default_mlp_hidden = llama_mlp_hidden,
      .block_tensors = llama_block_tensors,
      .hf_config = llama_hf_config};
  return family;
}

}  // namespace trident
