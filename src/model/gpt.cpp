#include "model/gpt.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/copy.hpp"
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

}  // namespace

void add_gpt_parameters(ParamStore& params, const ModelConfig& cfg, const std::vector<ModelChunk>& chunks) {
  const std::int64_t C = cfg.d_model;
  constexpr int by_rows = 0, by_columns = 1, qkv_blocks = 3;  // Conv1D weights are [in, out]
  bool embedding = false, head = false;
  for (const ModelChunk& chunk : chunks) embedding |= chunk.embedding, head |= chunk.head;
  if (embedding || head) params.add("wte.weight", {cfg.vocab, C}, by_rows);
  if (embedding) params.add("wpe.weight", {cfg.seq_len, C});
  for (const ModelChunk& chunk : chunks) {
    for (int i = chunk.first_layer; i < chunk.end_layer(); ++i) {
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
  }
  if (head) {
    params.add("ln_f.weight", {C});
    params.add("ln_f.bias", {C});
  }
}

namespace {

// Pointers into `buffer` for the tensors the store holds; h is indexed by global layer and the
// tensors of layers (or the embedding / ln_f) held elsewhere stay null.
ModelTensors tensors_in(const FloatBuffer& buffer, const ParamStore& params, int layers) {
  auto at = [&](const std::string& name) -> float* {
    const ParamTensor* tensor = params.try_find(name);
    return tensor ? tensor->in(buffer) : nullptr;
  };
  ModelTensors t;
  t.wte = at("wte.weight");
  t.wpe = at("wpe.weight");
  t.h.resize(layers);
  for (int i = 0; i < layers; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    if (!at(h + "ln_1.weight")) continue;
    t.h[i] = {at(h + "ln_1.weight"), at(h + "ln_1.bias"), at(h + "attn.c_attn.weight"),
              at(h + "attn.c_attn.bias"), at(h + "attn.c_proj.weight"), at(h + "attn.c_proj.bias"),
              at(h + "ln_2.weight"), at(h + "ln_2.bias"), at(h + "mlp.c_fc.weight"), at(h + "mlp.c_fc.bias"),
              at(h + "mlp.c_proj.weight"), at(h + "mlp.c_proj.bias")};
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

FloatBuffer uninitialised(const char* name, std::size_t n) {
  return FloatBuffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(name)), n);
}

Workspace make_workspace(const ModelConfig& cfg, const TpShape& local, int B) {
  const std::size_t BT = static_cast<std::size_t>(B) * cfg.seq_len, C = cfg.d_model;
  return {uninitialised("dresidual", BT * C),
          uninitialised("dln", BT * C),
          uninitialised("datty", BT * local.attn_width),
          uninitialised("dqkv", 3 * BT * local.attn_width),
          uninitialised("datt", static_cast<std::size_t>(B) * local.heads * cfg.seq_len * cfg.seq_len),
          uninitialised("dfch", BT * local.mlp_width)};
}

// What the weight-gradient GEMMs of one block need besides the stashed activations: the gradients
// w.r.t. each linear layer's output, kept from I until W.
struct LayerOutputGrads {
  float* mlp_out;   // [B, T, C]      gradient w.r.t. the block output (mlp c_proj's output)
  float* fch;       // [B, T, 4C/tp]  gradient w.r.t. c_fc's output
  float* attn_out;  // [B, T, C]      gradient w.r.t. attn c_proj's output
  float* qkv;       // [B, T, 3C/tp]  gradient w.r.t. c_attn's output
};

std::size_t output_grad_floats(const ModelConfig& cfg, const TpShape& local, int B) {
  const std::size_t BT = static_cast<std::size_t>(B) * cfg.seq_len;
  return BT * (2 * static_cast<std::size_t>(cfg.d_model) + local.mlp_width + 3 * local.attn_width);
}

// One micro-batch's deferred weight gradients: the work to run at W, in order, and the output
// gradients it reads. A work item gets the grads_ready callback of the weight_grad() call.
struct DeferredWeightGrads {
  FloatBuffer output_grads;
  std::vector<LayerOutputGrads> layers;
  std::vector<std::function<void(const Gpt::GradsReadyFn&)>> work;
};

struct ChunkState {
  ChunkState(const ModelConfig& cfg, int B, int tp_size, const ModelChunk& spec, Recompute recompute,
             ActivationMemory& memory)
      : spec(spec), stash(cfg, B, tp_size, spec, StashContent::all, &memory) {
    if (recompute == Recompute::full)
      inputs = std::make_unique<ActivationArena>(cfg, B, tp_size, spec, StashContent::inputs, &memory);
  }
  ModelChunk spec;
  ActivationArena stash;
  std::unique_ptr<ActivationArena> inputs;  // recomputation: what forward keeps of each micro-batch
  std::map<int, DeferredWeightGrads> deferred;
};

}  // namespace


struct Gpt::Impl {
  Impl(const ModelConfig& cfg, int micro_batch_size, Comm& tp, std::vector<ModelChunk> chunk_specs,
       Recompute recompute)
      : cfg(cfg),
        B(micro_batch_size),
        tp(tp),
        local(cfg, tp.rank(), tp.size()),
        specs(std::move(chunk_specs)),
        params(tp.rank(), tp.size()),
        ws(make_workspace(cfg, local, micro_batch_size)),
        loss(micro_batch_size * cfg.seq_len, local, tp) {
    for (const ModelChunk& spec : specs)
      chunks.push_back(std::make_unique<ChunkState>(cfg, B, tp.size(), spec, recompute, memory));
  }

  // A term added before a TP all-reduce of partial sums (a row-parallel bias, the position
  // embedding) is added by TP rank 0 alone, so that the sum counts it once.
  const float* once(const float* term) const { return tp.rank() == 0 ? term : nullptr; }

  ChunkState& chunk(int index) {
    if (index < 0 || index >= static_cast<int>(chunks.size()))
      throw std::out_of_range("Gpt: chunk " + std::to_string(index) + " of " + std::to_string(chunks.size()));
    return *chunks[index];
  }

  double run_forward(const ModelChunk& spec, Activations& a, const int* targets);
  DeferredWeightGrads& acquire_output_grads(ChunkState& c, int microbatch);
  void release(ChunkState& c, int microbatch);

  ModelConfig cfg;
  int B;
  Comm& tp;
  TpShape local;
  std::vector<ModelChunk> specs;
  ParamStore params;
  ModelTensors weights, grads;
  ActivationMemory memory;
  std::vector<std::unique_ptr<ChunkState>> chunks;
  std::vector<FloatBuffer> spare_output_grads;  // freed DeferredWeightGrads buffers, for reuse
  Workspace ws;
  VocabParallelLoss loss;
};

// The forward pass of one chunk over a stash whose input (encoded, or tokens for the embedding
// chunk) is filled in. Returns the loss sum on the head chunk, else 0.
double Gpt::Impl::run_forward(const ModelChunk& spec, Activations& a, const int* targets) {
  const int T = cfg.seq_len, C = cfg.d_model, BT = B * T;
  const ModelTensors& p = weights;
  // Row-parallel linear C' → C: this rank's input features times its rows of w, summed over TP.
  auto row_parallel = [&](float* y, const float* x, const float* w, const float* bias, int in) {
    linear_forward(y, x, w, once(bias), BT, in, C);
    tp.all_reduce_sum(y, static_cast<std::size_t>(BT) * C);
  };
  if (spec.embedding) {
    encoder_forward(a.encoded, a.tokens.data(), p.wte, local.vocab_first, local.vocab_rows, once(p.wpe), B, T, C);
    tp.all_reduce_sum(a.encoded, static_cast<std::size_t>(BT) * C);  // each token's row is on one rank
  }
  const float* residual = a.encoded;
  for (int i = 0; i < spec.num_layers; ++i) {
    const BlockTensors& w = p.h[spec.first_layer + i];
    LayerActivations& x = a.layers[i];
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
  if (!spec.head) return 0.0;
  layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, residual, p.ln_f_weight, p.ln_f_bias, BT, C);
  tied_head_forward(a.probs, a.lnf, p.wte, BT, C, local.vocab_real, local.vocab_rows);
  return loss(a.probs, a.losses, targets);
}

DeferredWeightGrads& Gpt::Impl::acquire_output_grads(ChunkState& c, int microbatch) {
  DeferredWeightGrads& d = c.deferred[microbatch];
  const std::size_t floats = output_grad_floats(cfg, local, B);
  const std::size_t needed = floats * c.spec.num_layers;
  if (!spare_output_grads.empty() && spare_output_grads.back().extent(0) >= needed) {
    d.output_grads = spare_output_grads.back();
    spare_output_grads.pop_back();
  } else {
    d.output_grads = uninitialised("deferred_output_grads", needed);
  }
  memory.current += d.output_grads.extent(0) * sizeof(float);
  memory.peak = std::max(memory.peak, memory.current);
  const std::size_t BT = static_cast<std::size_t>(B) * cfg.seq_len, C = cfg.d_model;
  float* next = d.output_grads.data();
  auto take = [&](std::size_t n) { return std::exchange(next, next + n); };
  for (int i = 0; i < c.spec.num_layers; ++i)
    d.layers.push_back({take(BT * C), take(BT * local.mlp_width), take(BT * C), take(3 * BT * local.attn_width)});
  return d;
}

// Frees what the micro-batch holds once its weight gradients are done.
void Gpt::Impl::release(ChunkState& c, int microbatch) {
  if (auto d = c.deferred.find(microbatch); d != c.deferred.end()) {
    memory.current -= d->second.output_grads.extent(0) * sizeof(float);
    spare_output_grads.push_back(d->second.output_grads);
    c.deferred.erase(d);
  }
  c.stash.release(microbatch);
}

Gpt::Gpt(const ModelConfig& cfg, int micro_batch_size, std::uint64_t seed, Comm& tp, std::vector<ModelChunk> chunks,
         Recompute recompute) {
  if (chunks.empty()) chunks.push_back(whole_model(cfg));
  impl_ = std::make_unique<Impl>(cfg, micro_batch_size, tp, std::move(chunks), recompute);
  add_gpt_parameters(impl_->params, cfg, impl_->specs);
  impl_->params.allocate();
  init_gpt2_parameters(impl_->params, cfg.layers, seed);
  impl_->weights = tensors_in(impl_->params.values, impl_->params, cfg.layers);
  impl_->grads = tensors_in(impl_->params.grads, impl_->params, cfg.layers);
}

Gpt::~Gpt() = default;

double Gpt::forward(int chunk, int microbatch, const ForwardIO& io) {
  Impl& m = *impl_;
  ChunkState& c = m.chunk(chunk);
  const ModelChunk& spec = c.spec;
  const std::size_t BT = static_cast<std::size_t>(m.B) * m.cfg.seq_len, C = m.cfg.d_model;
  const int V = m.cfg.vocab;
  auto check_ids = [&](const IntBuffer* ids, const char* what) {
    if (!ids || ids->extent(0) != BT)
      throw std::invalid_argument(std::string("Gpt::forward: ") + what + " must hold micro_batch_size × seq_len = " +
                                  std::to_string(BT) + " tokens");
    if (!tokens_in_range(ids->data(), static_cast<long>(BT), V))
      throw std::invalid_argument("Gpt::forward: token ids must lie in [0, vocab = " + std::to_string(V) + ")");
  };
  if (spec.embedding) check_ids(io.tokens, "inputs");
  if (spec.head) check_ids(io.targets, "targets");
  if ((!spec.embedding && !io.input) || (!spec.head && !io.output))
    throw std::invalid_argument("Gpt::forward: chunk " + std::to_string(chunk) + " needs its input and output buffers");

  Activations& a = c.stash.acquire(microbatch);
  if (spec.embedding)
    Kokkos::deep_copy(a.tokens, *io.tokens);
  else
    copy_floats(a.encoded, io.input, BT * C);
  const double loss_sum = m.run_forward(spec, a, spec.head ? io.targets->data() : nullptr);
  if (!spec.head) copy_floats(io.output, spec.num_layers > 0 ? a.layers.back().residual3 : a.encoded, BT * C);
  if (c.inputs) {  // keep only what re-running this forward needs
    Activations& kept = c.inputs->acquire(microbatch);
    if (spec.embedding)
      Kokkos::deep_copy(kept.tokens, a.tokens);
    else
      copy_floats(kept.encoded, a.encoded, BT * C);
    if (spec.head) Kokkos::deep_copy(kept.targets, *io.targets);
    c.stash.release(microbatch);
  }
  return loss_sum;
}

void Gpt::backward(int chunk, int microbatch, float loss_scale, const BackwardIO& io, WeightGrads weight_grads,
                   const GradsReadyFn& grads_ready) {
  Impl& m = *impl_;
  ChunkState& c = m.chunk(chunk);
  const ModelChunk& spec = c.spec;
  const int B = m.B, T = m.cfg.seq_len, C = m.cfg.d_model, BT = B * T;
  const TpShape& local = m.local;
  const ModelTensors& p = m.weights;
  const ModelTensors& g = m.grads;
  const Workspace& ws = m.ws;
  if ((!spec.head && !io.output_grad) || (!spec.embedding && !io.input_grad))
    throw std::invalid_argument("Gpt::backward: chunk " + std::to_string(chunk) + " needs its gradient buffers");

  Activations* stashed = nullptr;
  if (c.inputs) {  // recomputation: rebuild the stash from the kept input
    Activations& kept = c.inputs->stash(microbatch);
    stashed = &c.stash.acquire(microbatch);
    if (spec.embedding)
      Kokkos::deep_copy(stashed->tokens, kept.tokens);
    else
      copy_floats(stashed->encoded, kept.encoded, static_cast<std::size_t>(BT) * C);
    m.run_forward(spec, *stashed, spec.head ? kept.targets.data() : nullptr);
    c.inputs->release(microbatch);
  } else {
    stashed = &c.stash.stash(microbatch);
  }
  const Activations& a = *stashed;

  // Weight-gradient work runs now (overlapping the TP all-reduce of the input gradient) or is
  // recorded for weight_grad(); output gradients it reads then live in `deferred`, not the workspace.
  const bool defer = weight_grads == WeightGrads::deferred;
  DeferredWeightGrads* deferred = defer ? &m.acquire_output_grads(c, microbatch) : nullptr;
  auto weight_work = [&](std::function<void(const GradsReadyFn&)> work) {
    if (defer)
      deferred->work.push_back(std::move(work));
    else
      work(grads_ready);
  };
  // Reports the tensors from `first` to `last` (inclusive, contiguous in the store) as final.
  auto report_ready = [&](const std::string& first, const std::string& last) {
    const ParamTensor& begin = m.params.find(first);
    const ParamTensor& end = m.params.find(last);
    const std::size_t offset = begin.offset, count = end.offset + end.size - begin.offset;
    weight_work([offset, count](const GradsReadyFn& ready) {
      if (ready) ready(offset, count);
    });
  };
  // The gradient entering a column-parallel layer (or the vocab-parallel head) from its input is
  // this rank's share only: it is summed over TP (Megatron's f operator in backward) while the
  // weight gradient is computed.
  auto reduce_input_grad_during = [&](float* dx, std::function<void(const GradsReadyFn&)> weight_grad) {
    const CommRequestPtr reduce = m.tp.all_reduce_sum_async(dx, static_cast<std::size_t>(BT) * C);
    weight_work(std::move(weight_grad));
    reduce->wait();
  };
  auto keep = [&](float* kept, const float* grad, std::size_t n) {
    copy_floats(kept, grad, n);
    return kept;
  };
  float* dresidual = ws.dresidual.data();
  float* dln = ws.dln.data();

  if (spec.head) {
    const float* last_residual = spec.num_layers > 0 ? a.layers.back().residual3 : a.encoded;
    // a.probs holds d(loss sum)/d(logits); loss_scale enters through the head's gemm alpha.
    tied_head_backward_input(dln, a.probs, p.wte, loss_scale, BT, C, local.vocab_real, local.vocab_rows);
    reduce_input_grad_during(dln, [=, probs = a.probs, lnf = a.lnf, dwte = g.wte](const GradsReadyFn&) {
      tied_head_backward_weight(dwte, probs, lnf, loss_scale, BT, C, local.vocab_real, local.vocab_rows);
    });
    Kokkos::deep_copy(ws.dresidual, 0.0f);
    layernorm_backward(dresidual, g.ln_f_weight, g.ln_f_bias, dln, last_residual, a.lnf_mean, a.lnf_rstd,
                       p.ln_f_weight, BT, C);
    report_ready("ln_f.weight", "ln_f.bias");
  } else {
    copy_floats(dresidual, io.output_grad, static_cast<std::size_t>(BT) * C);
  }
  for (int i = spec.num_layers - 1; i >= 0; --i) {
    const int l = spec.first_layer + i;
    const BlockTensors& w = p.h[l];
    const BlockTensors dw = g.h[l];
    const LayerActivations& x = a.layers[i];
    const float* residual = i > 0 ? a.layers[i - 1].residual3 : a.encoded;
    const int mlp = local.mlp_width, attn = local.attn_width;
    const std::size_t BTC = static_cast<std::size_t>(BT) * C;
    float* dfch = defer ? deferred->layers[i].fch : ws.dfch.data();
    float* dqkv = defer ? deferred->layers[i].qkv : ws.dqkv.data();
    // dresidual is the gradient w.r.t. this block's output; the residual connection passes it on
    // unchanged, and each branch adds its own contribution through its LayerNorm. It is the same
    // on every TP rank, so the row-parallel layers need no communication in backward.
    const float* d_mlp_out = defer ? keep(deferred->layers[i].mlp_out, dresidual, BTC) : dresidual;
    linear_backward_input(dfch, dresidual, w.mlp_proj_weight, BT, mlp, C);
    weight_work([=, fch_gelu = x.fch_gelu](const GradsReadyFn&) {
      linear_backward_weight(dw.mlp_proj_weight, dw.mlp_proj_bias, fch_gelu, d_mlp_out, BT, mlp, C);
    });
    gelu_backward(dfch, x.fch, dfch, static_cast<long>(BT) * mlp);
    linear_backward_input(dln, dfch, w.c_fc_weight, BT, C, mlp);
    reduce_input_grad_during(dln, [=, ln2 = x.ln2](const GradsReadyFn&) {
      linear_backward_weight(dw.c_fc_weight, dw.c_fc_bias, ln2, dfch, BT, C, mlp);
    });
    layernorm_backward(dresidual, dw.ln_2_weight, dw.ln_2_bias, dln, x.residual2, x.ln2_mean, x.ln2_rstd,
                       w.ln_2_weight, BT, C);
    const float* d_attn_out = defer ? keep(deferred->layers[i].attn_out, dresidual, BTC) : dresidual;
    linear_backward_input(ws.datty.data(), dresidual, w.attn_proj_weight, BT, attn, C);
    weight_work([=, atty = x.atty](const GradsReadyFn&) {
      linear_backward_weight(dw.attn_proj_weight, dw.attn_proj_bias, atty, d_attn_out, BT, attn, C);
    });
    attention_backward(dqkv, ws.datt.data(), ws.datty.data(), x.qkv, x.att, B, T, attn, local.heads);
    linear_backward_input(dln, dqkv, w.c_attn_weight, BT, C, 3 * attn);
    reduce_input_grad_during(dln, [=, ln1 = x.ln1](const GradsReadyFn&) {
      linear_backward_weight(dw.c_attn_weight, dw.c_attn_bias, ln1, dqkv, BT, C, 3 * attn);
    });
    layernorm_backward(dresidual, dw.ln_1_weight, dw.ln_1_bias, dln, residual, x.ln1_mean, x.ln1_rstd,
                       w.ln_1_weight, BT, C);
    const std::string h = "h." + std::to_string(l) + ".";
    report_ready(h + "ln_1.weight", h + "mlp.c_proj.bias");
  }
  if (spec.embedding) {
    encoder_backward(g.wte, g.wpe, dresidual, a.tokens.data(), local.vocab_first, local.vocab_rows, B, T, C);
    report_ready("wpe.weight", "wpe.weight");
  } else {
    copy_floats(io.input_grad, dresidual, static_cast<std::size_t>(BT) * C);
  }
  if (!defer) m.release(c, microbatch);
}

void Gpt::weight_grad(int chunk, int microbatch, const GradsReadyFn& grads_ready) {
  Impl& m = *impl_;
  ChunkState& c = m.chunk(chunk);
  const auto d = c.deferred.find(microbatch);
  if (d == c.deferred.end())
    throw std::logic_error("Gpt::weight_grad: micro-batch " + std::to_string(microbatch) + " of chunk " +
                           std::to_string(chunk) + " has no deferred weight gradients");
  for (const auto& work : d->second.work) work(grads_ready);
  m.release(c, microbatch);
}

double Gpt::forward(int microbatch, const IntBuffer& inputs, const IntBuffer& targets) {
  if (impl_->specs.size() != 1 || !impl_->specs[0].embedding || !impl_->specs[0].head)
    throw std::logic_error("Gpt::forward(microbatch, inputs, targets) needs the whole model on one rank");
  ForwardIO io;
  io.tokens = &inputs;
  io.targets = &targets;
  return forward(0, microbatch, io);
}

void Gpt::backward(int microbatch, float loss_scale, const GradsReadyFn& grads_ready) {
  backward(0, microbatch, loss_scale, BackwardIO{}, WeightGrads::now, grads_ready);
  if (grads_ready) {
    const ParamTensor& wte = impl_->params.find("wte.weight");
    grads_ready(wte.offset, wte.size);
  }
}

void Gpt::zero_grads() { Kokkos::deep_copy(impl_->params.grads, 0.0f); }

ParamStore& Gpt::params() { return impl_->params; }
const ParamStore& Gpt::params() const { return impl_->params; }
const ModelConfig& Gpt::config() const { return impl_->cfg; }
const std::vector<ModelChunk>& Gpt::chunks() const { return impl_->specs; }
int Gpt::micro_batch_size() const { return impl_->B; }
std::size_t Gpt::activation_bytes() const { return impl_->memory.current; }
std::size_t Gpt::peak_activation_bytes() const { return impl_->memory.peak; }

}  // namespace trident
