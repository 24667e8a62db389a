#include "model/transformer.hpp"

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
#include "kernels/layernorm.hpp"
#include "kernels/profile.hpp"
#include "kernels/residual.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/tied_head.hpp"
#include "model/backward_workspace.hpp"
#include "model/chunk_state.hpp"
#include "model/families.hpp"
#include "model/init.hpp"
#include "model/model_tensors.hpp"
#include "model/tp_shape.hpp"
#include "model/vocab_parallel_loss.hpp"

namespace trident {

void add_model_parameters(ParamStore& params, const ModelConfig& cfg, const std::vector<ModelChunk>& chunks,
                          ExpertShard experts) {
  bool embedding = false, head = false;
  for (const ModelChunk& chunk : chunks) embedding |= chunk.embedding, head |= chunk.head;
  const std::vector<TensorSpec> inputs = input_tensors(cfg);  // the embedding first
  if (embedding || (head && cfg.tie_embeddings)) params.add(inputs.front());
  if (embedding)
    for (auto tensor = inputs.begin() + 1; tensor != inputs.end(); ++tensor) params.add(*tensor);
  for (const ModelChunk& chunk : chunks)
    for (int layer = chunk.first_layer; layer < chunk.end_layer(); ++layer)
      for (const TensorSpec& tensor : layer_tensors(cfg, layer))
        if (experts.holds(tensor.expert, cfg.moe.experts)) params.add(tensor);
  if (!head) return;
  for (const TensorSpec& tensor : final_norm_tensors(cfg)) params.add(tensor);
  if (!cfg.tie_embeddings) params.add(untied_head_tensor(cfg));
}

namespace {

ModelConfig rows_per_rank(const ModelConfig& cfg, const Comm* cp) {
  ModelConfig rows = cfg;
  if (cp) rows.seq_len /= cp->size();
  return rows;
}

}  // namespace

// What the model is whatever its family; FamilyModel below is the family's composition.
struct Transformer::Impl {
  Impl(const ModelConfig& cfg, int micro_batch_size, Comm& tp, std::vector<ModelChunk> chunk_specs)
      : cfg(cfg), B(micro_batch_size), specs(std::move(chunk_specs)), params(tp.rank(), tp.size()) {}
  virtual ~Impl() = default;
  virtual void forward(int chunk, int microbatch, const ForwardIO& io) = 0;
  virtual void take_loss_sum(double* total) = 0;
  virtual void backward(int chunk, int microbatch, float loss_scale, const BackwardIO& io, WeightGrads weight_grads,
                        const GradsReadyFn& grads_ready) = 0;
  virtual void weight_grad(int chunk, int microbatch, const GradsReadyFn& grads_ready) = 0;
  virtual MoeContext* mixture() = 0;

  ModelConfig cfg;
  int B;
  std::vector<ModelChunk> specs;
  ParamStore params;
  ActivationMemory memory;
  Kokkos::View<double, MemSpace> loss_read{"loss_read"};  // take_loss_sum()'s on the host
};

namespace {

template <class Family>
class FamilyModel final : public Transformer::Impl {
 public:
  using Block = typename Family::Block;
  using Chunk = ChunkState<Block>;
  using Stash = Activations<Block>;
  using Deferred = DeferredWeightGrads<Block>;
  using ForwardIO = Transformer::ForwardIO;
  using BackwardIO = Transformer::BackwardIO;
  using GradsReadyFn = Transformer::GradsReadyFn;

  FamilyModel(const ModelConfig& cfg, int micro_batch_size, Comm& tp, std::vector<ModelChunk> chunk_specs,
              Recompute recompute, MatmulPrecision precision, bool sequence_parallel, Comm* cp, Comm* ep)
      : Impl(cfg, micro_batch_size, tp, std::move(chunk_specs)),
        rows_(rows_per_rank(cfg, cp)),
        gemm_(precision),
        family_(family_description(Family::family)),
        rope_(family_.rotary() ? std::make_unique<RopeTable>(cfg.seq_len, cfg.head_dim(), cfg.rope_theta) : nullptr),
        ws_(rows_, TpShape(cfg, tp.rank(), tp.size()), tp.size(), micro_batch_size, mlp_input_products(cfg),
            recompute == Recompute::selective && cfg.attention == AttentionKernel::explicit_probabilities,
            sequence_parallel ? tp.size() : 1),
        ring_(cp && cp->size() > 1 ? std::make_unique<RingAttention>(*cp, attention_heads(rows_, micro_batch_size,
                                                                                           tp.size()))
                                   : nullptr),
        moe_(cfg.moe.experts > 0 ? std::make_unique<MoeContext>(cfg, micro_batch_size * rows_.seq_len, ep) : nullptr),
        ctx_{micro_batch_size,
             rows_.seq_len,
             cfg.d_model,
             TpShape(cfg, tp.rank(), tp.size()),
             tp,
             gemm_,
             ws_.scratch(),
             rope_.get(),
             static_cast<float>(cfg.norm_eps),
             sequence_parallel,
             cfg.attention,
             ring_.get(),
             {},
             moe_.get()},
        loss_(micro_batch_size * rows_.seq_len, ctx_.local, tp) {
    for (const ModelChunk& spec : specs)
      chunks_.push_back(std::make_unique<Chunk>(rows_, B, tp.size(), spec, recompute, sequence_parallel,
                                                gemm_.precision() == MatmulPrecision::bf16, memory,
                                                ep ? ep->size() : 1));
    memory.resident = ws_.att.extent(0) * sizeof(float);
  }

  // Under bf16 the products read the weights from a bf16 copy of the parameters that the optimizer
  // keeps current (ParamStore::keep_bf16_copy). Called once the parameters hold their first values.
  void keep_bf16_weights() {
    if (gemm_.precision() != MatmulPrecision::bf16) return;
    params.keep_bf16_copy();
    gemm_.read_bf16_copy({params.values.data(), params.bf16_copy(), params.total_size()});
  }

  // Called once the parameters are allocated.
  void locate_tensors() {
    weights_ = std::make_unique<ModelTensors<Family>>(params.values, params, specs, cfg.layers);
    grads_ = std::make_unique<ModelTensors<Family>>(params.grads, params, specs, cfg.layers);
  }

  void forward(int chunk, int microbatch, const ForwardIO& io) override;
  void take_loss_sum(double* total) override { loss_.take_sum(total); }
  void backward(int chunk, int microbatch, float loss_scale, const BackwardIO& io, WeightGrads weight_grads,
                const GradsReadyFn& grads_ready) override;
  void weight_grad(int chunk, int microbatch, const GradsReadyFn& grads_ready) override;
  MoeContext* mixture() override { return moe_.get(); }

 private:
  Chunk& chunk(int index) {
    if (index < 0 || index >= static_cast<int>(chunks_.size()))
      throw std::out_of_range("Transformer: chunk " + std::to_string(index) + " of " + std::to_string(chunks_.size()));
    return *chunks_[index];
  }
  void check_forward_io(const ModelChunk& spec, int chunk, const ForwardIO& io) const;
  void run_forward(const ModelChunk& spec, Stash& a, const int* targets, bool counted);
  const Stash& stash_for_backward(Chunk& c, int microbatch);
  void embedding_forward(Stash& a);
  void embedding_backward(const Stash& a, bool now, const GradsReadyFn& grads_ready);
  void head_forward(Stash& a, const float* input, const int* targets, bool counted);
  void head_backward(const Stash& a, const float* input, float loss_scale, WeightGrads when);
  void head_weight_grad(const Stash& a, float loss_scale);
  void report_head(const GradsReadyFn& grads_ready) const;
  void blocks_backward(Chunk& c, const Stash& a, Deferred* deferred, const GradsReadyFn& grads_ready);
  Deferred& defer_weight_grads(Chunk& c, int microbatch, float loss_scale);
  void release(Chunk& c, int microbatch);
  void report_ready(const GradsReadyFn& grads_ready, std::string_view first, std::string_view last) const;
  void report_layer(const GradsReadyFn& grads_ready, int layer) const;
  void report_embedding(const GradsReadyFn& grads_ready) const;
  template <class Run>
  void with_norm_grads_summed_over_tp(const std::vector<float*>& norm_grads, Run&& run);

  // The model's shape as this rank computes it: seq_len / cp positions of each sequence (its two
  // chunks under context parallelism), where the parameters (the position table's rows) and the
  // rotary table keep the whole sequence's.
  const ModelConfig rows_;
  GemmContext gemm_;
  const FamilyDescription& family_;
  std::unique_ptr<RopeTable> rope_;  // rotary families only
  Workspace ws_;
  std::unique_ptr<RingAttention> ring_;  // context parallelism only
  std::unique_ptr<MoeContext> moe_;      // [model.moe] only
  LayerContext ctx_;
  std::unique_ptr<ModelTensors<Family>> weights_, grads_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  std::vector<FloatBuffer> spare_output_grads_;  // storage of finished Deferred records, for reuse
  VocabParallelLoss loss_;
};

// The forward pass of one chunk over a stash whose input (encoded, or tokens for the embedding
// chunk) is filled in. On the head chunk the loss sum is kept for take_loss_sum() when `counted`
// (not when recomputing a forward for its backward).
template <class Family>
void FamilyModel<Family>::run_forward(const ModelChunk& spec, Stash& a, const int* targets, bool counted) {
  ctx_.positions = a.positions;
  if (spec.embedding) embedding_forward(a);
  for (int i = 0; i < spec.num_layers; ++i) {
    const ProfileRegion layer(kLayerForwardRegion);
    ctx_.layer = spec.first_layer + i;
    Block::forward(ctx_, weights_->blocks[spec.first_layer + i], a.layers[i], block_input(a, i));
  }
  if (spec.head) head_forward(a, chunk_output(spec, a), targets, counted);
}

// Token (and position) embedding: each token's row of the embedding is on one TP rank, so the
// ranks' partial embeddings are summed (into this rank's rows under sequence parallelism).
template <class Family>
void FamilyModel<Family>::embedding_forward(Stash& a) {
  const TpShape& local = ctx_.local;
  float* partial = ctx_.partial_rows(a.encoded, ctx_.scratch.gathered);
  encoder_forward(partial, a.tokens.data(), weights_->embedding, local.vocab_first, local.vocab_rows,
                  ctx_.once(weights_->positions), B, ctx_.T, ctx_.C, a.positions.ids);
  ctx_.sum_rows(partial, a.encoded);
}

// The embedding's gradient from ws_.dresidual. A tied embedding is reported by the caller once its
// copies are summed; the position table and an untied embedding are final here.
template <class Family>
void FamilyModel<Family>::embedding_backward(const Stash& a, bool now, const GradsReadyFn& grads_ready) {
  const TpShape& local = ctx_.local;
  const float* dencoded = ctx_.gather_rows(ws_.dresidual.data(), ctx_.scratch.dgathered);
  encoder_backward(grads_->embedding, grads_->positions, dencoded, a.tokens.data(), local.vocab_first, local.vocab_rows,
                   B, ctx_.T, ctx_.C, a.positions.ids);
  if (!now) return;
  report_embedding(grads_ready);
}

// The final norm, the logits through the head (this rank's vocabulary rows) and the
// vocab-parallel loss.
template <class Family>
void FamilyModel<Family>::head_forward(Stash& a, const float* input, const int* targets, bool counted) {
  const int BT = ctx_.rows(), R = ctx_.local_rows(), C = ctx_.C;
  if constexpr (Block::kLayerNorm)
    layernorm_forward(a.final_norm, a.final_norm_mean, a.final_norm_rstd, input, weights_->final_norm,
                      weights_->final_norm_bias, R, C);
  else
    rmsnorm_forward(a.final_norm, a.final_norm_rstd, input, weights_->final_norm, ctx_.norm_eps, R, C);
  tied_head_forward(gemm_, a.probs, ctx_.gather_rows(a.final_norm, ctx_.scratch.gathered), weights_->head, BT, C,
                    ctx_.local.vocab_real, ctx_.local.vocab_rows);
  loss_(a.probs, a.losses, targets, counted);
}

// Leaves the gradient w.r.t. the head's input in ws_.dresidual. a.probs holds d(loss sum)/d(logits);
// loss_scale enters through the head's GEMM alpha. The gradient w.r.t. the final norm's output is
// this rank's vocabulary share: it is summed over TP while the head's weight gradient runs.
template <class Family>
void FamilyModel<Family>::head_backward(const Stash& a, const float* input, float loss_scale, WeightGrads when) {
  const int BT = ctx_.rows(), R = ctx_.local_rows(), C = ctx_.C;
  float* dln = ws_.dln.data();
  float* dln_sum = ctx_.partial_rows(dln, ctx_.scratch.dln_local);
  {
    const bool now = when == WeightGrads::now;
    const RoundedOnce rounded(gemm_, a.probs, now ? static_cast<long>(BT) * ctx_.local.vocab_rows : 0);
    tied_head_backward_input(gemm_, dln, a.probs, weights_->head, loss_scale, BT, C, ctx_.local.vocab_real,
                             ctx_.local.vocab_rows);
    const CommRequestPtr reduce = ctx_.sum_rows_async(dln, dln_sum);
    if (now) head_weight_grad(a, loss_scale);
    reduce->wait();
  }
  zero_floats(ws_.dresidual.data(), ws_.dresidual.extent(0));
  if constexpr (Block::kLayerNorm)
    layernorm_backward(ws_.dresidual.data(), grads_->final_norm, grads_->final_norm_bias, dln_sum, input,
                       a.final_norm_mean, a.final_norm_rstd, weights_->final_norm, R, C, ctx_.scratch.column_sums);
  else
    rmsnorm_backward(ws_.dresidual.data(), grads_->final_norm, dln_sum, input, a.final_norm_rstd, weights_->final_norm,
                     R, C, ctx_.scratch.column_sums);
}

template <class Family>
void FamilyModel<Family>::head_weight_grad(const Stash& a, float loss_scale) {
  tied_head_backward_weight(gemm_, grads_->head, a.probs, ctx_.gather_rows(a.final_norm, ctx_.scratch.gathered),
                            loss_scale, ctx_.rows(), ctx_.C, ctx_.local.vocab_real, ctx_.local.vocab_rows);
}

// The final norm (and the untied head) as final; a tied head's gradient waits for the caller's sum.
template <class Family>
void FamilyModel<Family>::report_head(const GradsReadyFn& grads_ready) const {
  const std::vector<TensorSpec> norm = final_norm_tensors(cfg);
  report_ready(grads_ready, norm.front().name, cfg.tie_embeddings ? norm.back().name : kUntiedHead);
}

// Sequence parallelism: a norm sees only this rank's rows, so what a backward adds to the norms'
// gradients (each d_model floats) is a partial sum. `run` adds it to zeroed gradients, whose
// earlier values wait aside; the contribution is then summed over TP and added back.
template <class Family>
template <class Run>
void FamilyModel<Family>::with_norm_grads_summed_over_tp(const std::vector<float*>& norm_grads, Run&& run) {
  if (!ctx_.sequence_parallel) return run();
  const std::size_t C = ctx_.C, n = norm_grads.size() * C;
  float* earlier = ws_.norm_grads.data();
  float* contribution = earlier + n;
  for (std::size_t i = 0; i < norm_grads.size(); ++i) {
    copy_floats(earlier + i * C, norm_grads[i], C);
    zero_floats(norm_grads[i], C);
  }
  run();
  for (std::size_t i = 0; i < norm_grads.size(); ++i) copy_floats(contribution + i * C, norm_grads[i], C);
  ctx_.tp.all_reduce_sum(contribution, n);
  for (std::size_t i = 0; i < norm_grads.size(); ++i)
    residual_forward(norm_grads[i], earlier + i * C, contribution + i * C, static_cast<long>(C));
}

// The chunk's blocks from last to first, ws_.dresidual carrying the gradient between them; with
// `deferred` the linear layers' weight gradients wait in it for weight_grad().
template <class Family>
void FamilyModel<Family>::blocks_backward(Chunk& c, const Stash& a, Deferred* deferred,
                                          const GradsReadyFn& grads_ready) {
  const WeightGrads when = deferred ? WeightGrads::deferred : WeightGrads::now;
  float* dresidual = ws_.dresidual.data();
  for (int i = c.spec.num_layers - 1; i >= 0; --i) {
    const int layer = c.spec.first_layer + i;
    const typename Block::OutputGrads kept = deferred ? deferred->blocks[i] : Block::in_place(ctx_, dresidual);
    ctx_.layer = layer;
    with_norm_grads_summed_over_tp(Block::norm_tensors(grads_->blocks[layer]), [&] {
      const ProfileRegion region(kLayerBackwardRegion);
      Block::backward(ctx_, weights_->blocks[layer], grads_->blocks[layer], a.layers[i], block_input(a, i), dresidual,
                      kept, when);
    });
    if (!deferred) report_layer(grads_ready, layer);
  }
}

// The stash of a micro-batch about to run backward; under recomputation it is rebuilt first by
// re-running forward from the kept input.
template <class Family>
auto FamilyModel<Family>::stash_for_backward(Chunk& c, int microbatch) -> const Stash& {
  if (!c.inputs) return c.stash.stash(microbatch);
  Stash& kept = c.inputs->stash(microbatch);
  Stash& rebuilt = c.stash.acquire(microbatch);
  rebuilt.positions = kept.positions;
  if (c.spec.embedding)
    copy_ints(rebuilt.tokens.data(), kept.tokens.data(), kept.tokens.extent(0));
  else
    copy_floats(rebuilt.encoded, kept.encoded, ctx_.local_floats());
  ctx_.counted = false;
  run_forward(c.spec, rebuilt, c.spec.head ? kept.targets.data() : nullptr, false);
  c.inputs->release(microbatch);
  return rebuilt;
}

template <class Family>
auto FamilyModel<Family>::defer_weight_grads(Chunk& c, int microbatch, float loss_scale) -> Deferred& {
  Deferred& d = c.deferred[microbatch];
  d.loss_scale = loss_scale;
  const std::size_t rows = ctx_.rows();
  std::size_t needed = 0;
  typename Block::OutputGrads layout{};
  Block::carve(layout, ctx_.local, rows, ctx_.C, [&](std::size_t n) { return needed += n, nullptr; });
  needed *= c.spec.num_layers;
  if (!spare_output_grads_.empty() && spare_output_grads_.back().extent(0) >= needed) {
    d.storage = spare_output_grads_.back();
    spare_output_grads_.pop_back();
  } else {
    d.storage = uninitialised("deferred_output_grads", needed);
  }
  memory.current += d.storage.extent(0) * sizeof(float);
  memory.peak = std::max(memory.peak, memory.current);
  float* next = d.storage.data();
  d.blocks.resize(c.spec.num_layers);
  for (typename Block::OutputGrads& block : d.blocks)
    Block::carve(block, ctx_.local, rows, ctx_.C, [&](std::size_t n) { return std::exchange(next, next + n); });
  return d;
}

// Frees what the micro-batch holds once its weight gradients are done.
template <class Family>
void FamilyModel<Family>::release(Chunk& c, int microbatch) {
  if (auto d = c.deferred.find(microbatch); d != c.deferred.end()) {
    memory.current -= d->second.storage.extent(0) * sizeof(float);
    spare_output_grads_.push_back(d->second.storage);
    c.deferred.erase(d);
  }
  c.stash.release(microbatch);
}

// Reports the gradients of the tensors from `first` to `last` (contiguous in the store) as final.
template <class Family>
void FamilyModel<Family>::report_ready(const GradsReadyFn& grads_ready, std::string_view first,
                                       std::string_view last) const {
  if (!grads_ready) return;
  const ParamTensor& begin = params.find(std::string(first));
  const ParamTensor& end = params.find(std::string(last));
  grads_ready(begin.offset, end.offset + end.size - begin.offset);
}

// A layer's tensors lie one after the other, as its description lists them (of a mixture's experts,
// those this rank holds).
template <class Family>
void FamilyModel<Family>::report_layer(const GradsReadyFn& grads_ready, int layer) const {
  if (!grads_ready) return;
  std::vector<TensorSpec> tensors = layer_tensors(cfg, layer);
  std::erase_if(tensors, [&](const TensorSpec& tensor) { return !params.try_find(tensor.name); });
  report_ready(grads_ready, tensors.front().name, tensors.back().name);
}

// The position table and an untied embedding (a tied one waits for its copies' sum).
template <class Family>
void FamilyModel<Family>::report_embedding(const GradsReadyFn& grads_ready) const {
  if (!family_.rotary()) report_ready(grads_ready, family_.positions, family_.positions);
  if (!cfg.tie_embeddings) report_ready(grads_ready, family_.embedding, family_.embedding);
}

template <class Family>
void FamilyModel<Family>::check_forward_io(const ModelChunk& spec, int chunk, const ForwardIO& io) const {
  // The ids' values are not read here (that would wait for the device): the data layer checks each
  // window's ids on the host as it reads them, an embedding row outside this rank's shard reads as
  // zeros, and a target outside the vocabulary makes the loss NaN.
  const std::size_t BT = ctx_.rows();
  auto check_ids = [&](const IntBuffer* ids, const char* what) {
    if (!ids || ids->extent(0) != BT)
      throw std::invalid_argument(std::string("Transformer::forward: ") + what +
                                  " must hold micro_batch_size × seq_len = " + std::to_string(BT) + " tokens");
  };
  if (spec.embedding) check_ids(io.tokens, "inputs");
  if (spec.head) check_ids(io.targets, "targets");
  if ((!spec.embedding && !io.input) || (!spec.head && !io.output))
    throw std::invalid_argument("Transformer::forward: chunk " + std::to_string(chunk) +
                                " needs its input and output buffers");
}

template <class Family>
void FamilyModel<Family>::forward(int chunk_index, int microbatch, const ForwardIO& io) {
  Chunk& c = chunk(chunk_index);
  const ModelChunk& spec = c.spec;
  check_forward_io(spec, chunk_index, io);
  const std::size_t BTC = ctx_.local_floats();  // the stream's rows on this rank
  Stash& a = c.stash.acquire(microbatch);
  a.positions = io.positions;
  if (spec.embedding)
    copy_ints(a.tokens.data(), io.tokens->data(), a.tokens.extent(0));
  else
    copy_floats(a.encoded, io.input, BTC);
  ctx_.counted = io.for_backward;  // a mixture's figures are training's, not an evaluation's
  run_forward(spec, a, spec.head ? io.targets->data() : nullptr, true);
  if (!spec.head) copy_floats(io.output, chunk_output(spec, a), BTC);
  if (!io.for_backward) {
    c.stash.release(microbatch);
  } else if (c.inputs) {  // keep only what re-running this forward needs
    Stash& kept = c.inputs->acquire(microbatch);
    kept.positions = io.positions;
    if (spec.embedding)
      copy_ints(kept.tokens.data(), a.tokens.data(), a.tokens.extent(0));
    else
      copy_floats(kept.encoded, a.encoded, BTC);
    if (spec.head) copy_ints(kept.targets.data(), io.targets->data(), kept.targets.extent(0));
    c.stash.release(microbatch);
  }
}

// Head, blocks in reverse, embedding: I always, W now or recorded for weight_grad(). Gradient
// ranges are reported in the order DP reduces them: the final norm (and untied head), the blocks
// from last to first, the position table (and untied embedding).
template <class Family>
void FamilyModel<Family>::backward(int chunk_index, int microbatch, float loss_scale, const BackwardIO& io,
                                   WeightGrads weight_grads, const GradsReadyFn& grads_ready) {
  Chunk& c = chunk(chunk_index);
  const ModelChunk& spec = c.spec;
  if ((!spec.head && !io.output_grad) || (!spec.embedding && !io.input_grad))
    throw std::invalid_argument("Transformer::backward: chunk " + std::to_string(chunk_index) +
                                " needs its gradient buffers");
  const Stash& a = stash_for_backward(c, microbatch);
  ctx_.positions = a.positions;
  ctx_.loss_scale = loss_scale;
  const bool now = weight_grads == WeightGrads::now;
  Deferred* deferred = now ? nullptr : &defer_weight_grads(c, microbatch, loss_scale);
  if (spec.head) {
    std::vector<float*> final_norm{grads_->final_norm};
    if (grads_->final_norm_bias) final_norm.push_back(grads_->final_norm_bias);
    with_norm_grads_summed_over_tp(final_norm,
                                   [&] { head_backward(a, chunk_output(spec, a), loss_scale, weight_grads); });
    if (now) report_head(grads_ready);
  } else {
    copy_floats(ws_.dresidual.data(), io.output_grad, ctx_.local_floats());
  }
  blocks_backward(c, a, deferred, grads_ready);
  if (spec.embedding)
    embedding_backward(a, now, grads_ready);
  else
    copy_floats(io.input_grad, ws_.dresidual.data(), ctx_.local_floats());
  if (now) release(c, microbatch);
}

template <class Family>
void FamilyModel<Family>::weight_grad(int chunk_index, int microbatch, const GradsReadyFn& grads_ready) {
  Chunk& c = chunk(chunk_index);
  const auto found = c.deferred.find(microbatch);
  if (found == c.deferred.end())
    throw std::logic_error("Transformer::weight_grad: micro-batch " + std::to_string(microbatch) + " of chunk " +
                           std::to_string(chunk_index) + " has no deferred weight gradients");
  const Deferred& d = found->second;
  const Stash& a = c.stash.stash(microbatch);
  if (c.spec.head) {
    head_weight_grad(a, d.loss_scale);
    report_head(grads_ready);
  }
  for (int i = c.spec.num_layers - 1; i >= 0; --i) {
    const int layer = c.spec.first_layer + i;
    {
      const ProfileRegion region(kLayerWeightGradRegion);
      Block::weight_grad(ctx_, grads_->blocks[layer], a.layers[i], d.blocks[i]);
    }
    report_layer(grads_ready, layer);
  }
  if (c.spec.embedding) {
    report_embedding(grads_ready);
  }
  release(c, microbatch);
}

template <class Family>
std::unique_ptr<Transformer::Impl> make_model(const ModelConfig& cfg, int micro_batch_size, std::uint64_t seed,
                                              Comm& tp, std::vector<ModelChunk> chunks, Recompute recompute,
                                              MatmulPrecision precision, bool sequence_parallel, Comm* cp,
                                              Comm* ep) {
  auto model = std::make_unique<FamilyModel<Family>>(cfg, micro_batch_size, tp, std::move(chunks), recompute, precision,
                                                     sequence_parallel, cp, ep);
  add_model_parameters(model->params, cfg, model->specs, ep ? ExpertShard{ep->rank(), ep->size()} : ExpertShard{});
  model->params.allocate();
  init_parameters(model->params, cfg, seed);
  model->keep_bf16_weights();
  model->locate_tensors();
  return model;
}

}  // namespace

Transformer::Transformer(const ModelConfig& cfg, int micro_batch_size, std::uint64_t seed, Comm& tp,
                         std::vector<ModelChunk> chunks, Recompute recompute, MatmulPrecision precision,
                         bool sequence_parallel, Comm* cp, Comm* ep) {
  if (chunks.empty()) chunks.push_back(whole_model(cfg));
  const int cp_size = cp ? cp->size() : 1;
  if (cp_size > 1 && cfg.seq_len % (2 * cp_size) != 0)
    throw std::invalid_argument("Transformer: context parallelism needs seq_len divisible by 2 · cp");
  if (sequence_parallel && (micro_batch_size * cfg.seq_len / cp_size) % tp.size() != 0)
    throw std::invalid_argument(
        "Transformer: sequence parallelism needs seq_len / cp divisible by the TP group's size");
  impl_ = with_family(cfg.family, [&]<class Family>(Family) -> std::unique_ptr<Impl> {
    return make_model<Family>(cfg, micro_batch_size, seed, tp, std::move(chunks), recompute, precision,
                              sequence_parallel, cp, ep);
  });
}

Transformer::~Transformer() = default;

void Transformer::forward(int chunk, int microbatch, const ForwardIO& io) { impl_->forward(chunk, microbatch, io); }

void Transformer::take_loss_sum(double* total) { impl_->take_loss_sum(total); }

void Transformer::take_mixture_figures(double* aux_sum, double* tokens_per_expert) {
  if (MoeContext* moe = impl_->mixture()) moe->take_figures(aux_sum, tokens_per_expert);
}

double Transformer::take_loss_sum() {
  take_loss_sum(impl_->loss_read.data());
  double sum = 0.0;
  Kokkos::deep_copy(sum, impl_->loss_read);
  return sum;
}

void Transformer::backward(int chunk, int microbatch, float loss_scale, const BackwardIO& io, WeightGrads weight_grads,
                   const GradsReadyFn& grads_ready) {
  impl_->backward(chunk, microbatch, loss_scale, io, weight_grads, grads_ready);
}

void Transformer::weight_grad(int chunk, int microbatch, const GradsReadyFn& grads_ready) {
  impl_->weight_grad(chunk, microbatch, grads_ready);
}

double Transformer::forward(int microbatch, const IntBuffer& inputs, const IntBuffer& targets,
                            TokenPositions positions) {
  if (impl_->specs.size() != 1 || !impl_->specs[0].embedding || !impl_->specs[0].head)
    throw std::logic_error("Transformer::forward(microbatch, inputs, targets) needs the whole model on one rank");
  ForwardIO io;
  io.tokens = &inputs;
  io.targets = &targets;
  io.positions = positions;
  forward(0, microbatch, io);
  return take_loss_sum();
}

void Transformer::backward(int microbatch, float loss_scale, const GradsReadyFn& grads_ready) {
  backward(0, microbatch, loss_scale, BackwardIO{}, WeightGrads::now, grads_ready);
  if (const ParamTensor* embedding = tied_embedding(); embedding && grads_ready)
    grads_ready(embedding->offset, embedding->size);
}

const ParamTensor* Transformer::tied_embedding() const {
  if (!impl_->cfg.tie_embeddings) return nullptr;
  return impl_->params.try_find(std::string(family_of(impl_->cfg).embedding));
}

void Transformer::zero_grads() { zero_floats(impl_->params.grads.data(), impl_->params.grads.extent(0)); }

ParamStore& Transformer::params() { return impl_->params; }
const ParamStore& Transformer::params() const { return impl_->params; }
const ModelConfig& Transformer::config() const { return impl_->cfg; }
const std::vector<ModelChunk>& Transformer::chunks() const { return impl_->specs; }
int Transformer::micro_batch_size() const { return impl_->B; }
std::size_t Transformer::activation_bytes() const { return impl_->memory.current; }
std::size_t Transformer::peak_activation_bytes() const { return impl_->memory.peak + impl_->memory.resident; }

}  // namespace trident
