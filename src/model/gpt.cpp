#include "model/gpt.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/encoder.hpp"
#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/linear.hpp"
#include "kernels/residual.hpp"
#include "kernels/tied_head.hpp"
#include "model/activation_arena.hpp"
#include "model/init.hpp"

namespace trident {

namespace {

// Pointers to the model's tensors inside one flat buffer: the values, or the gradients.
struct BlockTensors {
  float *ln_1_weight, *ln_1_bias;
  float *c_attn_weight, *c_attn_bias;
  float *attn_proj_weight, *attn_proj_bias;
  float *ln_2_weight, *ln_2_bias;
  float *c_fc_weight, *c_fc_bias;
  float *mlp_proj_weight, *mlp_proj_bias;
};

struct ModelTensors {
  float *wte, *wpe;
  std::vector<BlockTensors> h;
  float *ln_f_weight, *ln_f_bias;
};

void add_parameters(ParamStore& params, const ModelConfig& cfg) {
  const std::int64_t C = cfg.d_model;
  params.add("wte.weight", {cfg.vocab, C});
  params.add("wpe.weight", {cfg.seq_len, C});
  for (int i = 0; i < cfg.layers; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    params.add(h + "ln_1.weight", {C});
    params.add(h + "ln_1.bias", {C});
    params.add(h + "attn.c_attn.weight", {C, 3 * C});
    params.add(h + "attn.c_attn.bias", {3 * C});
    params.add(h + "attn.c_proj.weight", {C, C});
    params.add(h + "attn.c_proj.bias", {C});
    params.add(h + "ln_2.weight", {C});
    params.add(h + "ln_2.bias", {C});
    params.add(h + "mlp.c_fc.weight", {C, 4 * C});
    params.add(h + "mlp.c_fc.bias", {4 * C});
    params.add(h + "mlp.c_proj.weight", {4 * C, C});
    params.add(h + "mlp.c_proj.bias", {C});
  }
  params.add("ln_f.weight", {C});
  params.add("ln_f.bias", {C});
}

ModelTensors tensors_in(const FloatBuffer& buffer, const ParamStore& params, int layers) {
  auto at = [&](const std::string& name) { return params.find(name).in(buffer); };
  ModelTensors t;
  t.wte = at("wte.weight");
  t.wpe = at("wpe.weight");
  for (int i = 0; i < layers; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    t.h.push_back({at(h + "ln_1.weight"), at(h + "ln_1.bias"), at(h + "attn.c_attn.weight"),
                   at(h + "attn.c_attn.bias"), at(h + "attn.c_proj.weight"), at(h + "attn.c_proj.bias"),
                   at(h + "ln_2.weight"), at(h + "ln_2.bias"), at(h + "mlp.c_fc.weight"), at(h + "mlp.c_fc.bias"),
                   at(h + "mlp.c_proj.weight"), at(h + "mlp.c_proj.bias")});
  }
  t.ln_f_weight = at("ln_f.weight");
  t.ln_f_bias = at("ln_f.bias");
  return t;
}

// Gradients of activations during one backward pass. Micro-batches run backward one at a time,
// so one set serves them all; it is allocated once.
struct Workspace {
  FloatBuffer dresidual;  // [B, T, C]  gradient w.r.t. the residual stream
  FloatBuffer dln;        // [B, T, C]  gradient w.r.t. a LayerNorm output
  FloatBuffer datty;      // [B, T, C]  gradient w.r.t. the attention output
  FloatBuffer dqkv;       // [B, T, 3C]
  FloatBuffer datt;       // [B, H, T, T]
  FloatBuffer dfch;       // [B, T, 4C] gradient w.r.t. the GELU output, then its input
};

Workspace make_workspace(const ModelConfig& cfg, int B) {
  const std::size_t BT = static_cast<std::size_t>(B) * cfg.seq_len, C = cfg.d_model;
  auto buffer = [](const char* name, std::size_t n) {
    return FloatBuffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(name)), n);
  };
  return {buffer("dresidual", BT * C), buffer("dln", BT * C),     buffer("datty", BT * C),
          buffer("dqkv", 3 * BT * C),   buffer("datt", B * cfg.heads * cfg.seq_len * cfg.seq_len),
          buffer("dfch", 4 * BT * C)};
}

}  // namespace

struct Gpt::Impl {
  Impl(const ModelConfig& cfg, int micro_batch_size) : cfg(cfg), B(micro_batch_size), arena(cfg, micro_batch_size) {}

  ModelConfig cfg;
  int B;
  ParamStore params;
  ModelTensors weights, grads;
  ActivationArena arena;
  Workspace ws;
};

Gpt::Gpt(const ModelConfig& cfg, int micro_batch_size, std::uint64_t seed)
    : impl_(std::make_unique<Impl>(cfg, micro_batch_size)) {
  add_parameters(impl_->params, cfg);
  impl_->params.allocate();
  init_gpt2_parameters(impl_->params, cfg.layers, seed);
  impl_->weights = tensors_in(impl_->params.values, impl_->params, cfg.layers);
  impl_->grads = tensors_in(impl_->params.grads, impl_->params, cfg.layers);
  impl_->ws = make_workspace(cfg, micro_batch_size);
}

Gpt::~Gpt() = default;

double Gpt::forward(int microbatch, const IntBuffer& inputs, const IntBuffer& targets) {
  const int B = impl_->B, T = impl_->cfg.seq_len, C = impl_->cfg.d_model, H = impl_->cfg.heads;
  const int V = impl_->cfg.vocab, BT = B * T;
  if (inputs.extent(0) != static_cast<std::size_t>(BT) || targets.extent(0) != static_cast<std::size_t>(BT))
    throw std::invalid_argument("Gpt::forward: inputs and targets must hold micro_batch_size × seq_len = " +
                                std::to_string(BT) + " tokens");
  if (!tokens_in_range(inputs.data(), BT, V) || !tokens_in_range(targets.data(), BT, V))
    throw std::invalid_argument("Gpt::forward: token ids must lie in [0, vocab = " + std::to_string(V) + ")");
  const ModelTensors& p = impl_->weights;
  Activations& a = impl_->arena.acquire(microbatch);
  Kokkos::deep_copy(a.tokens, inputs);

  encoder_forward(a.encoded, a.tokens.data(), p.wte, p.wpe, B, T, C);
  const float* residual = a.encoded;
  for (int l = 0; l < impl_->cfg.layers; ++l) {
    const BlockTensors& w = p.h[l];
    LayerActivations& x = a.layers[l];
    layernorm_forward(x.ln1, x.ln1_mean, x.ln1_rstd, residual, w.ln_1_weight, w.ln_1_bias, BT, C);
    linear_forward(x.qkv, x.ln1, w.c_attn_weight, w.c_attn_bias, BT, C, 3 * C);
    attention_forward(x.atty, x.att, x.qkv, B, T, C, H);
    linear_forward(x.residual2, x.atty, w.attn_proj_weight, w.attn_proj_bias, BT, C, C);
    residual_forward(x.residual2, x.residual2, residual, BT * C);
    layernorm_forward(x.ln2, x.ln2_mean, x.ln2_rstd, x.residual2, w.ln_2_weight, w.ln_2_bias, BT, C);
    linear_forward(x.fch, x.ln2, w.c_fc_weight, w.c_fc_bias, BT, C, 4 * C);
    gelu_forward(x.fch_gelu, x.fch, BT * 4 * C);
    linear_forward(x.residual3, x.fch_gelu, w.mlp_proj_weight, w.mlp_proj_bias, BT, 4 * C, C);
    residual_forward(x.residual3, x.residual3, x.residual2, BT * C);
    residual = x.residual3;
  }
  layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, residual, p.ln_f_weight, p.ln_f_bias, BT, C);
  tied_head_forward(a.probs, a.lnf, p.wte, BT, C, V);
  return softmax_cross_entropy(a.probs, a.losses, targets.data(), BT, V);
}

void Gpt::backward(int microbatch, float loss_scale, const GradsReadyFn& grads_ready) {
  const int B = impl_->B, T = impl_->cfg.seq_len, C = impl_->cfg.d_model, H = impl_->cfg.heads;
  const int V = impl_->cfg.vocab, BT = B * T, L = impl_->cfg.layers;
  const ModelTensors& p = impl_->weights;
  const ModelTensors& g = impl_->grads;
  Activations& a = impl_->arena.stash(microbatch);
  Workspace& ws = impl_->ws;
  const ParamStore& params = impl_->params;
  // Reports the tensors from `first` to `last` (inclusive, contiguous in the store) as final.
  auto report_ready = [&](const std::string& first, const std::string& last) {
    if (!grads_ready) return;
    const ParamTensor& begin = params.find(first);
    const ParamTensor& end = params.find(last);
    grads_ready(begin.offset, end.offset + end.size - begin.offset);
  };
  float* dresidual = ws.dresidual.data();
  float* dln = ws.dln.data();
  const float* last_residual = L > 0 ? a.layers[L - 1].residual3 : a.encoded;

  // a.probs holds d(loss sum)/d(logits); loss_scale enters through the head's gemm alpha.
  tied_head_backward_input(dln, a.probs, p.wte, loss_scale, BT, C, V);
  tied_head_backward_weight(g.wte, a.probs, a.lnf, loss_scale, BT, C, V);
  Kokkos::deep_copy(ws.dresidual, 0.0f);
  layernorm_backward(dresidual, g.ln_f_weight, g.ln_f_bias, dln, last_residual, a.lnf_mean, a.lnf_rstd,
                     p.ln_f_weight, BT, C);
  report_ready("ln_f.weight", "ln_f.bias");
  for (int l = L - 1; l >= 0; --l) {
    const BlockTensors& w = p.h[l];
    const BlockTensors& dw = g.h[l];
    const LayerActivations& x = a.layers[l];
    const float* residual = l > 0 ? a.layers[l - 1].residual3 : a.encoded;
    // dresidual is the gradient w.r.t. this block's output; the residual connection passes it on
    // unchanged, and each branch adds its own contribution through its LayerNorm.
    linear_backward_input(ws.dfch.data(), dresidual, w.mlp_proj_weight, BT, 4 * C, C);
    linear_backward_weight(dw.mlp_proj_weight, dw.mlp_proj_bias, x.fch_gelu, dresidual, BT, 4 * C, C);
    gelu_backward(ws.dfch.data(), x.fch, ws.dfch.data(), BT * 4 * C);
    linear_backward_input(dln, ws.dfch.data(), w.c_fc_weight, BT, C, 4 * C);
    linear_backward_weight(dw.c_fc_weight, dw.c_fc_bias, x.ln2, ws.dfch.data(), BT, C, 4 * C);
    layernorm_backward(dresidual, dw.ln_2_weight, dw.ln_2_bias, dln, x.residual2, x.ln2_mean, x.ln2_rstd,
                       w.ln_2_weight, BT, C);
    linear_backward_input(ws.datty.data(), dresidual, w.attn_proj_weight, BT, C, C);
    linear_backward_weight(dw.attn_proj_weight, dw.attn_proj_bias, x.atty, dresidual, BT, C, C);
    attention_backward(ws.dqkv.data(), ws.datt.data(), ws.datty.data(), x.qkv, x.att, B, T, C, H);
    linear_backward_input(dln, ws.dqkv.data(), w.c_attn_weight, BT, C, 3 * C);
    linear_backward_weight(dw.c_attn_weight, dw.c_attn_bias, x.ln1, ws.dqkv.data(), BT, C, 3 * C);
    layernorm_backward(dresidual, dw.ln_1_weight, dw.ln_1_bias, dln, residual, x.ln1_mean, x.ln1_rstd,
                       w.ln_1_weight, BT, C);
    const std::string h = "h." + std::to_string(l) + ".";
    report_ready(h + "ln_1.weight", h + "mlp.c_proj.bias");
  }
  encoder_backward(g.wte, g.wpe, dresidual, a.tokens.data(), B, T, C);
  report_ready("wte.weight", "wpe.weight");
  impl_->arena.release(microbatch);
}

void Gpt::zero_grads() { Kokkos::deep_copy(impl_->params.grads, 0.0f); }

ParamStore& Gpt::params() { return impl_->params; }
const ParamStore& Gpt::params() const { return impl_->params; }
const ModelConfig& Gpt::config() const { return impl_->cfg; }
int Gpt::micro_batch_size() const { return impl_->B; }
std::size_t Gpt::activation_bytes() const { return impl_->arena.current_bytes(); }
std::size_t Gpt::peak_activation_bytes() const { return impl_->arena.peak_bytes(); }

}  // namespace trident
