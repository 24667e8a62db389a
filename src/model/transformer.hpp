// The transformer of DESIGN.md "Model", either family (model.family, model/families.hpp): GPT-2
// (token + position embedding, pre-LN blocks, final LayerNorm, tied head) or Llama (token
// embedding, RMSNorm blocks with RoPE, grouped-query attention and SwiGLU, final RMSNorm, untied or
// tied head), then the vocab-parallel cross-entropy. Read top to bottom like llm.c's train_gpt2.c:
// forward() runs the layers in order and stashes what backward() needs in the activation arena;
// backward() runs them in reverse. Each block is a forward/backward/weight-gradient triple over its
// own stash record (model/gpt2_block.hpp, model/llama_block.hpp); this class owns the chunks, the
// stashes, the deferred weight gradients and the embedding and head.
//
// Tensor parallelism (Megatron-LM style) over a TP group: each rank holds its heads of the
// column-parallel attention projections, its columns of the MLP's column-parallel input layers, the
// matching slices of the row-parallel output projections, and its rows of the vocab-parallel
// embedding and head (vocabulary padded to a multiple of tp). The residual stream, the norms, the
// position table and the row-parallel biases are replicated and stay identical on every rank.
// Forward all-reduces the embedding and each row-parallel output; backward all-reduces the gradient
// entering each column-parallel layer and the head's input gradient. With a group of one rank this
// is exactly the single-rank model.
//
// Pipeline parallelism: a rank holds only its chunks of the model (model_chunk.hpp), one per
// virtual stage it serves; forward and backward run one chunk for one micro-batch, taking the
// previous chunk's output or the next chunk's input gradient as a buffer and writing their own.
// Zero-bubble schedules split backward: backward(..., WeightGrads::deferred) computes only the
// input gradient (I) and keeps each block's output gradients, from which weight_grad() runs the
// weight-gradient GEMMs later (W).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/comm.hpp"
#include "deck/config.hpp"
#include "kernels/device.hpp"
#include "model/families.hpp"
#include "model/layer_context.hpp"
#include "model/model_chunk.hpp"
#include "model/param_store.hpp"

namespace trident {

class Transformer {
 public:
  // micro_batch_size sequences of cfg.seq_len tokens per forward/backward. tp: the tensor-parallel
  // group (make_local_comm() for none); it must outlive the model, and every rank of it makes the
  // same forward/backward calls in the same order (they are collective). cfg.heads % tp.size()
  // must be 0 (std::invalid_argument otherwise). chunks: the pieces of the model this rank holds,
  // in the order of its virtual stages (default: the whole model as one chunk). precision: what
  // its matrix products multiply in (the model owns their GemmContext).
  // sequence_parallel: the residual stream, chunk inputs and outputs included, holds B·T/tp rows per
  // TP rank (layer_context.hpp). cp: the context-parallel group (null or a group of one: none); it
  // must outlive the model. With cp ranks each rank computes T = seq_len / cp rows of each
  // sequence, its two chunks (model/ring_attention.hpp), whose position ids ForwardIO gives.
  // ep: the expert-parallel group ([model.moe] with parallel.ep; null or a group of one: every
  // expert here); it must outlive the model. Rank r of it holds experts [r·E/ep, (r+1)·E/ep) and
  // the all-to-alls of the mixtures run over it (model/moe_mlp.hpp).
  Transformer(const ModelConfig& cfg, int micro_batch_size, std::uint64_t seed, Comm& tp,
              std::vector<ModelChunk> chunks = {}, Recompute recompute = Recompute::none,
              MatmulPrecision precision = MatmulPrecision::automatic, bool sequence_parallel = false,
              Comm* cp = nullptr, Comm* ep = nullptr);
  ~Transformer();
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  // Device buffers of one chunk's forward pass. tokens: the embedding chunk's micro_batch_size ×
  // seq_len input ids; targets: the head chunk's; input: [B·T·C] hidden states from the previous
  // chunk (chunks without the embedding); output: receives this chunk's [B·T·C] output (chunks
  // without the head). Under sequence parallelism these and BackwardIO's hold this TP rank's
  // B·T/tp rows: [B·T·C / tp].
  struct ForwardIO {
    const IntBuffer* tokens = nullptr;
    const IntBuffer* targets = nullptr;
    TokenPositions positions;  // position ids and packed documents (every chunk; kernels/document_mask.hpp)
    const float* input = nullptr;
    float* output = nullptr;
    bool for_backward = true;  // false (evaluation): nothing stays stashed after the pass
  };
  // output_grad: [B·T·C] gradient w.r.t. this chunk's output (chunks without the head);
  // input_grad: receives the gradient w.r.t. its input (chunks without the embedding).
  struct BackwardIO {
    const float* output_grad = nullptr;
    float* input_grad = nullptr;
  };

  // One chunk and one micro-batch, identified by `microbatch` (any id; several may be in flight,
  // as pipeline schedules need). forward() stashes its activations under that id and, on the head
  // chunk, keeps on the device the sum (not the mean) of the per-token cross-entropy losses, the
  // same on every TP rank, for take_loss_sum(). backward() of the same id accumulates into
  // params().grads the gradient of loss_scale × (that sum) and frees the stash; with loss_scale =
  // 1 / (tokens in the global batch) a step's gradients are those of the mean loss. With
  // WeightGrads::deferred the weight gradients (and the stash) wait for weight_grad() of the same
  // chunk and micro-batch. Nothing here waits for the device.
  //
  // grads_ready, when given, is called each time a contiguous range [offset, offset + count) of
  // params().grads has received this micro-batch's last contribution (ln_f, then the blocks from
  // last to first, then wpe; never wte, whose tied copies the caller sums first): data parallelism
  // starts reducing those gradients while backward goes on. A range is reported after every TP
  // collective it depends on has completed.
  using GradsReadyFn = std::function<void(std::size_t offset, std::size_t count)>;
  void forward(int chunk, int microbatch, const ForwardIO& io);
  void backward(int chunk, int microbatch, float loss_scale, const BackwardIO& io,
                WeightGrads weight_grads = WeightGrads::now, const GradsReadyFn& grads_ready = {});
  void weight_grad(int chunk, int microbatch, const GradsReadyFn& grads_ready = {});

  // *total (one device double) = the loss sums of the forwards since the last take, added in the
  // order they ran (0 off the head chunk); starts a new count. Queued: the host does not wait.
  void take_loss_sum(double* total);
  // The same, read on the host (waits for the device).
  double take_loss_sum();
  // [model.moe]: the step's mixture figures since the last take, queued the same way (nothing for a
  // dense model). *aux_sum: the load-balancing loss's sum, weighted as the loss sum is (divided by
  // the step's tokens it is the step's aux loss); tokens_per_expert[layers · experts]: each layer's
  // tokens per expert (0 where this rank holds no mixture of that layer).
  void take_mixture_figures(double* aux_sum, double* tokens_per_expert);

  // The whole model on one rank (a single chunk with the embedding and the head): inputs/targets
  // are micro_batch_size × seq_len token ids; returns the micro-batch's loss sum (read on the host).
  // backward() also reports wte through grads_ready.
  double forward(int microbatch, const IntBuffer& inputs, const IntBuffer& targets, TokenPositions positions = {});
  void backward(int microbatch, float loss_scale, const GradsReadyFn& grads_ready = {});

  void zero_grads();

  // The token embedding when the head is tied to it and this rank holds a copy (first stage, and
  // the last as the head): its gradient is the caller's to sum over the copies and report. Null
  // for an untied head, whose model reports both tensors itself.
  const ParamTensor* tied_embedding() const;

  ParamStore& params();
  const ParamStore& params() const;
  const ModelConfig& config() const;
  const std::vector<ModelChunk>& chunks() const;
  int micro_batch_size() const;

  // Bytes of activation stashes (and deferred weight-gradient inputs) on this rank: currently held
  // and the high-water mark since construction (with, under selective recomputation, the buffer its
  // backward rebuilds one layer's attention probabilities in).
  std::size_t activation_bytes() const;
  std::size_t peak_activation_bytes() const;

  // The family's composition (transformer.cpp), behind one interface.
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace trident
