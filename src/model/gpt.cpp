#include "model/gpt.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/copy.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/encoder.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/tied_head.hpp"
#include "model/activation_arena.hpp"
#include "model/gpt2_block.hpp"
#include "model/init.hpp"
#include "model/tp_shape.hpp"
#include "model/vocab_parallel_loss.hpp"

namespace trident {

void add_gpt_parameters(ParamStore& params, const ModelConfig& cfg, const std::vector<ModelChunk>& chunks) {
  constexpr int by_rows = 0;
  bool embedding = false, head = false;
  for (const ModelChunk& chunk : chunks) embedding |= chunk.embedding, head |= chunk.head;
  if (embedding || head) params.add("wte.weight", {cfg.vocab, cfg.d_model}, by_rows);
  if (embedding) params.add("wpe.weight", {cfg.seq_len, cfg.d_model});
  for (const ModelChunk& chunk : chunks)
    for (int layer = chunk.first_layer; layer < chunk.end_layer(); ++layer)
      Gpt2Block::add_parameters(params, cfg, layer);
  if (head) {
    params.add("ln_f.weight", {cfg.d_model});
    params.add("ln_f.bias", {cfg.d_model});
  }
}

namespace {

// Pointers to the model's tensors inside one flat buffer (the values, or the gradients): the
// embedding and the head's where this rank holds them (else null), and the blocks by global layer
// (those held elsewhere left null).
struct ModelTensors {
  float *wte, *wpe;
  std::vector<Gpt2Block::Weights> h;
  float *ln_f_weight, *ln_f_bias;
};

ModelTensors tensors_in(const FloatBuffer& buffer, const ParamStore& params, const std::vector<ModelChunk>& chunks,
                        int layers) {
  auto at = [&](const std::string& name) -> float* {
    const ParamTensor* tensor = params.try_find(name);
    return tensor ? tensor->in(buffer) : nullptr;
  };
  ModelTensors t{at("wte.weight"), at("wpe.weight"), std::vector<Gpt2Block::Weights>(layers), at("ln_f.weight"),
                 at("ln_f.bias")};
  for (const ModelChunk& chunk : chunks)
    for (int layer = chunk.first_layer; layer < chunk.end_layer(); ++layer)
      t.h[layer] = Gpt2Block::tensors(buffer, params, layer);
  return t;
}

FloatBuffer uninitialised(const char* name, std::size_t n) {
  return FloatBuffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(name)), n);
}

// Activation gradients of one backward pass (micro-batches run backward one at a time).
struct Workspace {
  Workspace(const ModelConfig& cfg, const TpShape& local, int B)
      : dresidual(uninitialised("dresidual", rows(cfg, B) * cfg.d_model)),
        dln(uninitialised("dln", rows(cfg, B) * cfg.d_model)),
        datty(uninitialised("datty", rows(cfg, B) * local.attn_width)),
        dqkv(uninitialised("dqkv", 3 * rows(cfg, B) * local.attn_width)),
        datt(uninitialised("datt", static_cast<std::size_t>(B) * local.heads * cfg.seq_len * cfg.seq_len)),
        dfch(uninitialised("dfch", rows(cfg, B) * local.mlp_width)) {}
  static std::size_t rows(const ModelConfig& cfg, int B) { return static_cast<std::size_t>(B) * cfg.seq_len; }
  BackwardScratch scratch() const {
    return {dln.data(), datty.data(), datt.data(), dfch.data(), dqkv.data(), nullptr};  // GPT-2 has no up projection
  }

  FloatBuffer dresidual;  // [B, T, C] gradient w.r.t. the residual stream, passed from block to block
  FloatBuffer dln, datty, dqkv, datt, dfch;
};

// One micro-batch's deferred weight gradients (between I and W of a zero-bubble schedule): each
// block's output gradients, kept in `storage`; the layers' inputs stay in the micro-batch's stash.
// The head's weight gradient reads the stash and the loss scale.
struct DeferredWeightGrads {
  FloatBuffer storage;
  std::vector<Gpt2Block::OutputGrads> blocks;  // the chunk's blocks, in order
  float loss_scale = 1.0f;
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

// What block `index` of a chunk reads: the previous block's output, or the chunk's input (the
// embedding output, or the previous chunk's output).
const float* block_input(const Activations& a, int index) {
  return index > 0 ? a.layers[index - 1].residual3 : a.encoded;
}

const float* chunk_output(const ModelChunk& spec, const Activations& a) { return block_input(a, spec.num_layers); }

}  // namespace

struct Gpt::Impl {
  Impl(const ModelConfig& cfg, int micro_batch_size, Comm& tp, std::vector<ModelChunk> chunk_specs, Recompute recompute,
       MatmulPrecision precision)
      : cfg(cfg),
        B(micro_batch_size),
        specs(std::move(chunk_specs)),
        params(tp.rank(), tp.size()),
        gemm(precision),
        ws(cfg, TpShape(cfg, tp.rank(), tp.size()), micro_batch_size),
        ctx{micro_batch_size, cfg.seq_len, cfg.d_model, TpShape(cfg, tp.rank(), tp.size()), tp, gemm, ws.scratch()},
        loss(micro_batch_size * cfg.seq_len, ctx.local, tp) {
    for (const ModelChunk& spec : specs)
      chunks.push_back(std::make_unique<ChunkState>(cfg, B, tp.size(), spec, recompute, memory));
  }

  ChunkState& chunk(int index) {
    if (index < 0 || index >= static_cast<int>(chunks.size()))
      throw std::out_of_range("Gpt: chunk " + std::to_string(index) + " of " + std::to_string(chunks.size()));
    return *chunks[index];
  }

  double run_forward(const ModelChunk& spec, Activations& a, const int* targets);
  const Activations& stash_for_backward(ChunkState& c, int microbatch);
  void embedding_forward(Activations& a);
  double head_forward(Activations& a, const float* input, const int* targets);
  void head_backward(const Activations& a, const float* input, float loss_scale, WeightGrads when);
  void head_weight_grad(const Activations& a, float loss_scale);
  void blocks_backward(ChunkState& c, const Activations& a, DeferredWeightGrads* deferred,
                       const GradsReadyFn& grads_ready);
  DeferredWeightGrads& defer_weight_grads(ChunkState& c, int microbatch, float loss_scale);
  void release(ChunkState& c, int microbatch);
  void report_ready(const GradsReadyFn& grads_ready, const std::string& first, const std::string& last) const;

  ModelConfig cfg;
  int B;
  std::vector<ModelChunk> specs;
  ParamStore params;
  GemmContext gemm;
  Workspace ws;
  LayerContext ctx;
  ModelTensors weights, grads;
  ActivationMemory memory;
  std::vector<std::unique_ptr<ChunkState>> chunks;
  std::vector<FloatBuffer> spare_output_grads;  // storage of finished DeferredWeightGrads, for reuse
  VocabParallelLoss loss;
};

// The forward pass of one chunk over a stash whose input (encoded, or tokens for the embedding
// chunk) is filled in. Returns the loss sum on the head chunk, else 0.
double Gpt::Impl::run_forward(const ModelChunk& spec, Activations& a, const int* targets) {
  if (spec.embedding) embedding_forward(a);
  for (int i = 0; i < spec.num_layers; ++i)
    Gpt2Block::forward(ctx, weights.h[spec.first_layer + i], a.layers[i], block_input(a, i));
  return spec.head ? head_forward(a, chunk_output(spec, a), targets) : 0.0;
}

// Token and position embedding: each token's row of wte is on one TP rank, so the ranks' partial
// embeddings are summed.
void Gpt::Impl::embedding_forward(Activations& a) {
  const TpShape& local = ctx.local;
  encoder_forward(a.encoded, a.tokens.data(), weights.wte, local.vocab_first, local.vocab_rows, ctx.once(weights.wpe),
                  B, ctx.T, ctx.C);
  ctx.tp.all_reduce_sum(a.encoded, ctx.hidden_floats());
}

// ln_f, the logits through the tied wte (this rank's vocabulary columns) and the vocab-parallel loss.
double Gpt::Impl::head_forward(Activations& a, const float* input, const int* targets) {
  const int BT = ctx.rows(), C = ctx.C;
  layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, input, weights.ln_f_weight, weights.ln_f_bias, BT, C);
  tied_head_forward(gemm, a.probs, a.lnf, weights.wte, BT, C, ctx.local.vocab_real, ctx.local.vocab_rows);
  return loss(a.probs, a.losses, targets);
}

// Leaves the gradient w.r.t. the head's input in ws.dresidual. a.probs holds d(loss sum)/d(logits);
// loss_scale enters through the head's GEMM alpha. The gradient w.r.t. ln_f's output is this
// rank's vocabulary share: it is summed over TP while the tied head's weight gradient runs.
void Gpt::Impl::head_backward(const Activations& a, const float* input, float loss_scale, WeightGrads when) {
  const int BT = ctx.rows(), C = ctx.C;
  float* dln = ws.dln.data();
  tied_head_backward_input(gemm, dln, a.probs, weights.wte, loss_scale, BT, C, ctx.local.vocab_real,
                           ctx.local.vocab_rows);
  const CommRequestPtr reduce = ctx.tp.all_reduce_sum_async(dln, ctx.hidden_floats());
  if (when == WeightGrads::now) head_weight_grad(a, loss_scale);
  reduce->wait();
  Kokkos::deep_copy(ws.dresidual, 0.0f);
  layernorm_backward(ws.dresidual.data(), grads.ln_f_weight, grads.ln_f_bias, dln, input, a.lnf_mean, a.lnf_rstd,
                     weights.ln_f_weight, BT, C);
}

void Gpt::Impl::head_weight_grad(const Activations& a, float loss_scale) {
  tied_head_backward_weight(gemm, grads.wte, a.probs, a.lnf, loss_scale, ctx.rows(), ctx.C, ctx.local.vocab_real,
                            ctx.local.vocab_rows);
}

// The chunk's blocks from last to first, ws.dresidual carrying the gradient between them; with
// `deferred` the linear layers' weight gradients wait in it for weight_grad().
void Gpt::Impl::blocks_backward(ChunkState& c, const Activations& a, DeferredWeightGrads* deferred,
                                const GradsReadyFn& grads_ready) {
  const WeightGrads when = deferred ? WeightGrads::deferred : WeightGrads::now;
  float* dresidual = ws.dresidual.data();
  for (int i = c.spec.num_layers - 1; i >= 0; --i) {
    const int layer = c.spec.first_layer + i;
    const Gpt2Block::OutputGrads kept = deferred ? deferred->blocks[i] : Gpt2Block::in_place(ctx, dresidual);
    Gpt2Block::backward(ctx, weights.h[layer], grads.h[layer], a.layers[i], block_input(a, i), dresidual, kept, when);
    if (!deferred) report_ready(grads_ready, Gpt2Block::first_parameter(layer), Gpt2Block::last_parameter(layer));
  }
}

// The stash of a micro-batch about to run backward; under recomputation it is rebuilt first by
// re-running forward from the kept input.
const Activations& Gpt::Impl::stash_for_backward(ChunkState& c, int microbatch) {
  if (!c.inputs) return c.stash.stash(microbatch);
  Activations& kept = c.inputs->stash(microbatch);
  Activations& rebuilt = c.stash.acquire(microbatch);
  if (c.spec.embedding)
    Kokkos::deep_copy(rebuilt.tokens, kept.tokens);
  else
    copy_floats(rebuilt.encoded, kept.encoded, ctx.hidden_floats());
  run_forward(c.spec, rebuilt, c.spec.head ? kept.targets.data() : nullptr);
  c.inputs->release(microbatch);
  return rebuilt;
}

DeferredWeightGrads& Gpt::Impl::defer_weight_grads(ChunkState& c, int microbatch, float loss_scale) {
  DeferredWeightGrads& d = c.deferred[microbatch];
  d.loss_scale = loss_scale;
  const std::size_t rows = ctx.rows();
  std::size_t needed = 0;
  Gpt2Block::OutputGrads layout{};
  Gpt2Block::carve(layout, ctx.local, rows, ctx.C, [&](std::size_t n) { return needed += n, nullptr; });
  needed *= c.spec.num_layers;
  if (!spare_output_grads.empty() && spare_output_grads.back().extent(0) >= needed) {
    d.storage = spare_output_grads.back();
    spare_output_grads.pop_back();
  } else {
    d.storage = uninitialised("deferred_output_grads", needed);
  }
  memory.current += d.storage.extent(0) * sizeof(float);
  memory.peak = std::max(memory.peak, memory.current);
  float* next = d.storage.data();
  d.blocks.resize(c.spec.num_layers);
  for (Gpt2Block::OutputGrads& block : d.blocks)
    Gpt2Block::carve(block, ctx.local, rows, ctx.C, [&](std::size_t n) { return std::exchange(next, next + n); });
  return d;
}

// Frees what the micro-batch holds once its weight gradients are done.
void Gpt::Impl::release(ChunkState& c, int microbatch) {
  if (auto d = c.deferred.find(microbatch); d != c.deferred.end()) {
    memory.current -= d->second.storage.extent(0) * sizeof(float);
    spare_output_grads.push_back(d->second.storage);
    c.deferred.erase(d);
  }
  c.stash.release(microbatch);
}

// Reports the gradients of the tensors from `first` to `last` (contiguous in the store) as final.
void Gpt::Impl::report_ready(const GradsReadyFn& grads_ready, const std::string& first, const std::string& last) const {
  if (!grads_ready) return;
  const ParamTensor& begin = params.find(first);
  const ParamTensor& end = params.find(last);
  grads_ready(begin.offset, end.offset + end.size - begin.offset);
}

Gpt::Gpt(const ModelConfig& cfg, int micro_batch_size, std::uint64_t seed, Comm& tp, std::vector<ModelChunk> chunks,
         Recompute recompute, MatmulPrecision precision) {
  if (chunks.empty()) chunks.push_back(whole_model(cfg));
  impl_ = std::make_unique<Impl>(cfg, micro_batch_size, tp, std::move(chunks), recompute, precision);
  add_gpt_parameters(impl_->params, cfg, impl_->specs);
  impl_->params.allocate();
  init_gpt2_parameters(impl_->params, cfg.layers, seed);
  impl_->weights = tensors_in(impl_->params.values, impl_->params, impl_->specs, cfg.layers);
  impl_->grads = tensors_in(impl_->params.grads, impl_->params, impl_->specs, cfg.layers);
}

Gpt::~Gpt() = default;

double Gpt::forward(int chunk, int microbatch, const ForwardIO& io) {
  Impl& m = *impl_;
  ChunkState& c = m.chunk(chunk);
  const ModelChunk& spec = c.spec;
  const std::size_t BT = m.ctx.rows(), BTC = m.ctx.hidden_floats();
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
    copy_floats(a.encoded, io.input, BTC);
  const double loss_sum = m.run_forward(spec, a, spec.head ? io.targets->data() : nullptr);
  if (!spec.head) copy_floats(io.output, chunk_output(spec, a), BTC);
  if (c.inputs) {  // keep only what re-running this forward needs
    Activations& kept = c.inputs->acquire(microbatch);
    if (spec.embedding)
      Kokkos::deep_copy(kept.tokens, a.tokens);
    else
      copy_floats(kept.encoded, a.encoded, BTC);
    if (spec.head) Kokkos::deep_copy(kept.targets, *io.targets);
    c.stash.release(microbatch);
  }
  return loss_sum;
}

// Head, blocks in reverse, embedding: I always, W now or recorded for weight_grad(). Gradient
// ranges are reported in the order DP reduces them: ln_f, the blocks from last to first, wpe.
void Gpt::backward(int chunk, int microbatch, float loss_scale, const BackwardIO& io, WeightGrads weight_grads,
                   const GradsReadyFn& grads_ready) {
  Impl& m = *impl_;
  ChunkState& c = m.chunk(chunk);
  const ModelChunk& spec = c.spec;
  if ((!spec.head && !io.output_grad) || (!spec.embedding && !io.input_grad))
    throw std::invalid_argument("Gpt::backward: chunk " + std::to_string(chunk) + " needs its gradient buffers");
  const Activations& a = m.stash_for_backward(c, microbatch);
  const bool now = weight_grads == WeightGrads::now;
  DeferredWeightGrads* deferred = now ? nullptr : &m.defer_weight_grads(c, microbatch, loss_scale);

  if (spec.head) {
    m.head_backward(a, chunk_output(spec, a), loss_scale, weight_grads);
    if (now) m.report_ready(grads_ready, "ln_f.weight", "ln_f.bias");
  } else {
    copy_floats(m.ws.dresidual.data(), io.output_grad, m.ctx.hidden_floats());
  }
  m.blocks_backward(c, a, deferred, grads_ready);
  if (spec.embedding) {
    const TpShape& local = m.ctx.local;
    encoder_backward(m.grads.wte, m.grads.wpe, m.ws.dresidual.data(), a.tokens.data(), local.vocab_first,
                     local.vocab_rows, m.B, m.ctx.T, m.ctx.C);
    if (now) m.report_ready(grads_ready, "wpe.weight", "wpe.weight");
  } else {
    copy_floats(io.input_grad, m.ws.dresidual.data(), m.ctx.hidden_floats());
  }
  if (now) m.release(c, microbatch);
}

void Gpt::weight_grad(int chunk, int microbatch, const GradsReadyFn& grads_ready) {
  Impl& m = *impl_;
  ChunkState& c = m.chunk(chunk);
  const auto found = c.deferred.find(microbatch);
  if (found == c.deferred.end())
    throw std::logic_error("Gpt::weight_grad: micro-batch " + std::to_string(microbatch) + " of chunk " +
                           std::to_string(chunk) + " has no deferred weight gradients");
  const DeferredWeightGrads& d = found->second;
  const Activations& a = c.stash.stash(microbatch);
  if (c.spec.head) {
    m.head_weight_grad(a, d.loss_scale);
    m.report_ready(grads_ready, "ln_f.weight", "ln_f.bias");
  }
  for (int i = c.spec.num_layers - 1; i >= 0; --i) {
    const int layer = c.spec.first_layer + i;
    Gpt2Block::weight_grad(m.ctx, m.grads.h[layer], a.layers[i], d.blocks[i]);
    m.report_ready(grads_ready, Gpt2Block::first_parameter(layer), Gpt2Block::last_parameter(layer));
  }
  if (c.spec.embedding) m.report_ready(grads_ready, "wpe.weight", "wpe.weight");
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
