// Llama (Touvron et al. 2023; Llama 3, as Hugging Face's LlamaForCausalLM): RMSNorm, rotary
// positions, grouped-query attention, SwiGLU MLP, no biases, an untied head unless the deck ties
// it. nn.Linear weights are [out, in].
#include "family/families_list.hpp"

namespace trident {

namespace {

constexpr std::string_view kLlamaKeys[] = {"kv_heads", "ffn_hidden", "rope_theta", "norm_eps"};

std::vector<TensorSpec> llama_block_tensors(const ModelConfig& model) {
  const std::int64_t c = model.d_model, hd = model.head_dim(), f = model.mlp_hidden();
  const std::int64_t q = model.heads * hd, kv = model.key_value_heads() * hd;
  constexpr int by_rows = 0, by_columns = 1;
  const TensorInit ones = TensorInit::ones;
  // q, k, v (by heads) and gate, up column-parallel, each group one product's weight; o_proj and
  // down_proj row-parallel.
  return {{"input_layernorm.weight", {c}, -1, 1, ones},
          {"self_attn.q_proj.weight", {q, c}, by_rows},
          {"self_attn.k_proj.weight", {kv, c}, by_rows},
          {"self_attn.v_proj.weight", {kv, c}, by_rows},
          {"self_attn.o_proj.weight", {c, q}, by_columns},
          {"post_attention_layernorm.weight", {c}, -1, 1, ones},
          {"mlp.gate_proj.weight", {f, c}, by_rows},
          {"mlp.up_proj.weight", {f, c}, by_rows},
          {"mlp.down_proj.weight", {c, f}, by_columns}};
}

// 2/3 of 4·d_model rounded up to a multiple of 256 (Meta's rule).
int llama_mlp_hidden(int d_model) {
  const long hidden = (8L * d_model + 2) / 3;
  return static_cast<int>((hidden + 255) / 256 * 256);
}

}  // namespace

const FamilyDescription& llama_family() {
  static const FamilyDescription family{
      .family = ModelFamily::llama,
      .title = "Llama",
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
      .block_tensors = llama_block_tensors};
  return family;
}

}  // namespace trident
