// GPT-2 (Radford et al. 2019, as Hugging Face's GPT2LMHeadModel): LayerNorm, learned positions,
// GELU MLP, biases everywhere, the head tied to wte. Conv1D weights are [in, out].
#include "family/families_list.hpp"

namespace trident {

namespace {

std::vector<TensorSpec> gpt2_block_tensors(const ModelConfig& model, int /*layer*/) {
  const std::int64_t c = model.d_model, f = model.mlp_hidden();  // f = 4c for every GPT-2 deck
  constexpr int by_rows = 0, by_columns = 1, qkv_blocks = 3;
  const TensorInit ones = TensorInit::ones, zeros = TensorInit::zeros, projection = TensorInit::residual_normal;
  // Column-parallel c_attn (its q, k and v each split) and c_fc, with their biases; row-parallel
  // c_proj, whose biases every rank holds.
  return {{"ln_1.weight", {c}, -1, 1, ones},
          {"ln_1.bias", {c}, -1, 1, zeros},
          {"attn.c_attn.weight", {c, 3 * c}, by_columns, qkv_blocks},
          {"attn.c_attn.bias", {3 * c}, 0, qkv_blocks, zeros},
          {"attn.c_proj.weight", {c, c}, by_rows, 1, projection},
          {"attn.c_proj.bias", {c}, -1, 1, zeros},
          {"ln_2.weight", {c}, -1, 1, ones},
          {"ln_2.bias", {c}, -1, 1, zeros},
          {"mlp.c_fc.weight", {c, f}, by_columns},
          {"mlp.c_fc.bias", {f}, 0, 1, zeros},
          {"mlp.c_proj.weight", {f, c}, by_rows, 1, projection},
          {"mlp.c_proj.bias", {c}, -1, 1, zeros}};
}

// GPT2Config: n_inner null means 4 · n_embd; the position table may be longer than seq_len.
std::vector<HfConfigField> gpt2_hf_config(const ModelConfig& model) {
  const auto number = [](auto value) { return std::to_string(value); };
  return {{"model_type", "model.family", {"gpt2"}, ""},
          {"n_layer", "model.layers", {number(model.layers)}, ""},
          {"n_embd", "model.d_model", {number(model.d_model)}, ""},
          {"n_head", "model.heads", {number(model.heads)}, ""},
          {"vocab_size", "model.vocab", {number(model.vocab)}, ""},
          {"n_inner", "4 x model.d_model (GPT-2's MLP)", {"null", number(4 * model.d_model)}, "null"},
          {"activation_function", "GPT-2's tanh GELU", {"gelu_new"}, "gelu_new"},
          {"layer_norm_epsilon", "GPT-2's LayerNorm epsilon", {"1e-05"}, "1e-05"},
          {"tie_word_embeddings", "model.tie_embeddings", {"true"}, "true"},
          {"n_positions", "model.seq_len", {number(model.seq_len)}, "1024", true}};
}

}  // namespace

const FamilyDescription& gpt2_family() {
  static const FamilyDescription family{
      .family = ModelFamily::gpt2,
      .title = "GPT-2",
      .hf_prefix = "transformer.",
      .layer_prefix = "h.",
      .embedding = "wte.weight",
      .positions = "wpe.weight",
      .final_norm = "ln_f",
      .norm = NormKind::layernorm,
      .mlp = MlpKind::gelu,
      .head_may_untie = false,
      .head_tied_by_default = true,
      .own_keys = {},
      .tp_split = "c_attn and c_fc split by columns, both c_proj by rows (bias replicated),\n"
                  "wte split by vocabulary rows, wpe and LayerNorms replicated",
      .default_mlp_hidden = [](int d_model) { return 4 * d_model; },
      .block_tensors = gpt2_block_tensors,
      .hf_config = gpt2_hf_config};
  return family;
}

}  // namespace trident
