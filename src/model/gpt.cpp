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
#include "model/tp_shape.hpp"
#include "model/vocab_parallel_loss.hpp"

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

// Global shapes and how each tensor is split across the TP ranks (see the header's comment).
void add_parameters(ParamStore& params, const ModelConfig& cfg) {
  const std::int64_t C = cfg.d_model;
  constexpr int by_rows = 0, by_columns = 1, qkv_blocks = 3;  // Conv1D weights are [in, out]
  params.add("wte.weight", {cfg.vocab, C}, by_rows);
  params.add("wpe.weight", {cfg.seq_len, C});
  for (int i = 0; i < cfg.layers; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    params.add(h + "ln_1.weight", {C});
    params.add(h + "ln_1.bias", {C});
    params.add(h + "attn.c_attn.weight", {C, 3 * C}, by_columns, qkv_blocks);
    params.add(h + "attn.c_attn.bias", {3 * C}, 0, qkv_blocks);
    params.add(h + "attn.c_proj.weight", {C, C}, by_rows);
    params.add(h + "attn.c_proj.bias", {C});
    params.add(h + "ln_2.weight", {C});
    params.add(h + "ln_2.bias", {C});
    params.add(h + "mlp.c_fc.weight", {C, 4 * C}, by_columns);
    params.add(h + "mlp.c_fc.bias", {4 * C}, 0);
    params.add(h + "mlp.c_proj.weight", {4 * C, C}, by_rows);
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
  FloatBuffer dresidual;  // [B, T, C]       gradient w.r.t. the residual stream
  FloatBuffer dln;        // [B, T, C]       gradient w.r.t. a LayerNorm output
  FloatBuffer datty;      // [B, T, C/tp]    gradient w.r.t. the attention output
  FloatBuffer dqkv;       // [B, T, 3C/tp]
  FloatBuffer datt;       // [B, H/tp, T, T]
  FloatBuffer dfch;       // [B, T, 4C/tp]   gradient w.r.t. the GELU output, then its input
};

Workspace make_workspace(const ModelConfig& cfg, const TpShape& local, int B) {
  const std::size_t BT = static_cast<std::size_t>(B) * cfg.seq_len, C = cfg.d_model;
  auto buffer = [](const char* name, std::size_t n) {
    return FloatBuffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(name)), n);
  };
  return {buffer("dresidual", BT * C),
          buffer("dln", BT * C),
          buffer("datty", BT * local.attn_width),
          buffer("dqkv", 3 * BT * local.attn_width),
          buffer("datt", static_cast<std::size_t>(B) * local.heads * cfg.seq_len * cfg.seq_len),
          buffer("dfch", BT * local.mlp_width)};
}

}  // namespace

struct Gpt::Impl {
  Impl(const ModelConfig& cfg, int micro_batch_size, Comm& tp)
      : cfg(cfg),
        B(micro_batch_size),
        tp(tp),
        local(cfg, tp.rank(), tp.size()),
        params(tp.rank(), tp.size()),
        arena(cfg, micro_batch_size, tp.size()),
        ws(make_workspace(cfg, local, micro_batch_size)),
        loss(micro_batch_size * cfg.seq_len, local, tp) {}

  // A term added before a TP all-reduce of partial sums (a row-parallel bias, the position
  // embedding) is added by TP rank 0 alone, so that the sum counts it once.
  const float* once(const float* term) const { return tp.rank() == 0 ? term : nullptr; }

  ModelConfig cfg;
  int B;
  Comm& tp;
  TpShape local;
  ParamStore params;
  ModelTensors weights, grads;
  ActivationArena arena;
  Workspace ws;
  VocabParallelLoss loss;
};

Gpt::Gpt(const ModelConfig& cfg, int micro_batch_size, std::uint64_t seed, Comm& tp)
    : impl_(std::make_unique<Impl>(cfg, micro_batch_size, tp)) {
  add_parameters(impl_->params, cfg);
  impl_->params.allocate();
  init_gpt2_parameters(impl_->params, cfg.layers, seed);
  impl_->weights = tensors_in(impl_->params.values, impl_->params, cfg.layers);
  impl_->grads = tensors_in(impl_->params.grads, impl_->params, cfg.layers);
}

Gpt::~Gpt() = default;

double Gpt::forward(int microbatch, const IntBuffer& inputs, const IntBuffer& targets) {
  const int B = impl_->B, T = impl_->cfg.seq_len, C = impl_->cfg.d_model, BT = B * T;
  const int V = impl_->cfg.vocab;
  if (inputs.extent(0) != static_cast<std::size_t>(BT) || targets.extent(0) != static_cast<std::size_t>(BT))
    throw std::invalid_argument("Gpt::forward: inputs and targets must hold micro_batch_size × seq_len = " +
                                std::to_string(BT) + " tokens");
  if (!tokens_in_range(inputs.data(), BT, V) || !tokens_in_range(targets.data(), BT, V))
    throw std::invalid_argument("Gpt::forward: token ids must lie in [0, vocab = " + std::to_string(V) + ")");
  Impl& m = *impl_;
  const TpShape& local = m.local;
  const ModelTensors& p = m.weights;
  Activations& a = m.arena.acquire(microbatch);
  Kokkos::deep_copy(a.tokens, inputs);
  // Row-parallel linear C' → C: this rank's input features times its rows of w, summed over TP.
  auto row_parallel = [&](float* y, const float* x, const float* w, const float* bias, int in) {
    linear_forward(y, x, w, m.once(bias), BT, in, C);
    m.tp.all_reduce_sum(y, static_cast<std::size_t>(BT) * C);
  };

  encoder_forward(a.encoded, a.tokens.data(), p.wte, local.vocab_first, local.vocab_rows, m.once(p.wpe), B, T, C);
  m.tp.all_reduce_sum(a.encoded, static_cast<std::size_t>(BT) * C);  // each token's row is on one rank
  const float* residual = a.encoded;
  for (int l = 0; l < m.cfg.layers; ++l) {
    const BlockTensors& w = p.h[l];
    LayerActivations& x = a.layers[l];
    layernorm_forward(x.ln1, x.ln1_mean, x.ln1_rstd, residual, w.ln_1_weight, w.ln_1_bias, BT, C);
    linear_forward(x.qkv, x.ln1, w.c_attn_weight, w.c_attn_bias, BT, C, 3 * local.attn_width);
    attention_forward(x.atty, x.att, x.qkv, B, T, local.attn_width, local.heads);
    row_parallel(x.residual2, x.atty, w.attn_proj_weight, w.attn_proj_bias, local.attn_width);
    residual_forward(x.residual2, x.residual2, residual, BT * C);
    layernorm_forward(x.ln2, x.ln2_mean, x.ln2_rstd, x.residual2, w.ln_2_weight, w.ln_2_bias, BT, C);
    linear_forward(x.fch, x.ln2, w.c_fc_weight, w.c_fc_bias, BT, C, local.mlp_width);
    gelu_forward(x.fch_gelu, x.fch, static_cast<long>(BT) * local.mlp_width);
    row_parallel(x.residual3, x.fch_gelu, w.mlp_proj_weight, w.mlp_proj_bias, local.mlp_width);
    residual_forward(x.residual3, x.residual3, x.residual2, BT * C);
    residual = x.residual3;
  }
  layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, residual, p.ln_f_weight, p.ln_f_bias, BT, C);
  tied_head_forward(a.probs, a.lnf, p.wte, BT, C, local.vocab_real, local.vocab_rows);
  return m.loss(a.probs, a.losses, targets.data());
}

void Gpt::backward(int microbatch, float loss_scale, const GradsReadyFn& grads_ready) {
  Impl& m = *impl_;
  const int B = m.B, T = m.cfg.seq_len, C = m.cfg.d_model, BT = B * T, L = m.cfg.layers;
  const TpShape& local = m.local;
  const ModelTensors& p = m.weights;
  const ModelTensors& g = m.grads;
  Activations& a = m.arena.stash(microbatch);
  const Workspace& ws = m.ws;
  // Reports the tensors from `first` to `last` (inclusive, contiguous in the store) as final.
  auto report_ready = [&](const std::string& first, const std::string& last) {
    if (!grads_ready) return;
    const ParamTensor& begin = m.params.find(first);
    const ParamTensor& end = m.params.find(last);
    grads_ready(begin.offset, end.offset + end.size - begin.offset);
  };
  // The gradient entering a column-parallel layer (or the vocab-parallel head) from its input is
  // this rank's share only: it is summed over TP (Megatron's f operator in backward) while the
  // weight gradient is computed.
  auto reduce_input_grad_during = [&](float* dx, const auto& weight_grad) {
    const CommRequestPtr reduce = m.tp.all_reduce_sum_async(dx, static_cast<std::size_t>(BT) * C);
    weight_grad();
    reduce->wait();
  };
  float* dresidual = ws.dresidual.data();
  float* dln = ws.dln.data();
  const float* last_residual = L > 0 ? a.layers[L - 1].residual3 : a.encoded;

  // a.probs holds d(loss sum)/d(logits); loss_scale enters through the head's gemm alpha.
  tied_head_backward_input(dln, a.probs, p.wte, loss_scale, BT, C, local.vocab_real, local.vocab_rows);
  reduce_input_grad_during(dln, [&] {
    tied_head_backward_weight(g.wte, a.probs, a.lnf, loss_scale, BT, C, local.vocab_real, local.vocab_rows);
  });
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
    // unchanged, and each branch adds its own contribution through its LayerNorm. It is the same
    // on every TP rank, so the row-parallel layers need no communication in backward.
    const int mlp = local.mlp_width, attn = local.attn_width;
    linear_backward_input(ws.dfch.data(), dresidual, w.mlp_proj_weight, BT, mlp, C);
    linear_backward_weight(dw.mlp_proj_weight, dw.mlp_proj_bias, x.fch_gelu, dresidual, BT, mlp, C);
    gelu_backward(ws.dfch.data(), x.fch, ws.dfch.data(), static_cast<long>(BT) * mlp);
    linear_backward_input(dln, ws.dfch.data(), w.c_fc_weight, BT, C, mlp);
    reduce_input_grad_during(dln, [&] {
      linear_backward_weight(dw.c_fc_weight, dw.c_fc_bias, x.ln2, ws.dfch.data(), BT, C, mlp);
    });
    layernorm_backward(dresidual, dw.ln_2_weight, dw.ln_2_bias, dln, x.residual2, x.ln2_mean, x.ln2_rstd,
                       w.ln_2_weight, BT, C);
    linear_backward_input(ws.datty.data(), dresidual, w.attn_proj_weight, BT, attn, C);
    linear_backward_weight(dw.attn_proj_weight, dw.attn_proj_bias, x.atty, dresidual, BT, attn, C);
    attention_backward(ws.dqkv.data(), ws.datt.data(), ws.datty.data(), x.qkv, x.att, B, T, attn, local.heads);
    linear_backward_input(dln, ws.dqkv.data(), w.c_attn_weight, BT, C, 3 * attn);
    reduce_input_grad_during(dln, [&] {
      linear_backward_weight(dw.c_attn_weight, dw.c_attn_bias, x.ln1, ws.dqkv.data(), BT, C, 3 * attn);
    });
    layernorm_backward(dresidual, dw.ln_1_weight, dw.ln_1_bias, dln, residual, x.ln1_mean, x.ln1_rstd,
                       w.ln_1_weight, BT, C);
    const std::string h = "h." + std::to_string(l) + ".";
    report_ready(h + "ln_1.weight", h + "mlp.c_proj.bias");
  }
  encoder_backward(g.wte, g.wpe, dresidual, a.tokens.data(), local.vocab_first, local.vocab_rows, B, T, C);
  report_ready("wte.weight", "wpe.weight");
  m.arena.release(microbatch);
}

void Gpt::zero_grads() { Kokkos::deep_copy(impl_->params.grads, 0.0f); }

ParamStore& Gpt::params() { return impl_->params; }
const ParamStore& Gpt::params() const { return impl_->params; }
const ModelConfig& Gpt::config() const { return impl_->cfg; }
int Gpt::micro_batch_size() const { return impl_->B; }
std::size_t Gpt::activation_bytes() const { return impl_->arena.current_bytes(); }
std::size_t Gpt::peak_activation_bytes() const { return impl_->arena.peak_bytes(); }

}  // namespace trident
