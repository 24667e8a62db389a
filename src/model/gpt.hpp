// GPT-2 (DESIGN.md "Model"): embeddings, L pre-LN blocks, final LayerNorm, tied head, cross-entropy.
// Read top to bottom like llm.c's train_gpt2.c: forward() runs the layers in order and stashes
// what backward() needs in the activation arena; backward() runs them in reverse.
//
// Tensor parallelism (Megatron-LM style) over a TP group: each rank holds its heads of the
// column-parallel c_attn, its columns of the column-parallel c_fc, the matching rows of the
// row-parallel c_proj layers, and its rows of the vocab-parallel wte (vocabulary padded to a
// multiple of tp). The residual stream, LayerNorms, wpe and the c_proj biases are replicated and
// stay identical on every rank. Forward all-reduces the embedding and each c_proj output; backward
// all-reduces the gradient entering each column-parallel layer and the tied head's input gradient.
// With a group of one rank this is exactly the single-rank model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "comm/comm.hpp"
#include "deck/config.hpp"
#include "kernels/device.hpp"
#include "model/param_store.hpp"

namespace trident {

class Gpt {
 public:
  // micro_batch_size sequences of cfg.seq_len tokens per forward/backward. tp: the tensor-parallel
  // group (make_local_comm() for none); it must outlive the model, and every rank of it makes the
  // same forward/backward calls in the same order (they are collective). cfg.heads % tp.size()
  // must be 0 (std::invalid_argument otherwise).
  Gpt(const ModelConfig& cfg, int micro_batch_size, std::uint64_t seed, Comm& tp);
  ~Gpt();
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  // One micro-batch, identified by `microbatch` (any id; several may be in flight, as pipeline
  // schedules need). inputs/targets: device buffers of micro_batch_size × seq_len token ids, the
  // same on every TP rank. forward() stashes its activations in the arena under that id and
  // returns the sum (not the mean) of the per-token cross-entropy losses, the same on every TP
  // rank. backward() of the same id accumulates into params().grads the gradient of
  // loss_scale × (that sum) and frees the stash; with loss_scale = 1 / (tokens in the global batch)
  // a step's gradients are those of the mean loss.
  double forward(int microbatch, const IntBuffer& inputs, const IntBuffer& targets);
  // grads_ready, when given, is called during backward each time a contiguous range
  // [offset, offset + count) of params().grads has received this micro-batch's last contribution
  // (ln_f, then the blocks from last to first, then the embeddings): data parallelism starts
  // reducing those gradients while backward goes on. A range is reported after every TP
  // collective it depends on has completed.
  using GradsReadyFn = std::function<void(std::size_t offset, std::size_t count)>;
  void backward(int microbatch, float loss_scale, const GradsReadyFn& grads_ready = {});

  void zero_grads();

  ParamStore& params();
  const ParamStore& params() const;
  const ModelConfig& config() const;
  int micro_batch_size() const;

  // Bytes of the activation arena: currently held and the high-water mark since construction.
  std::size_t activation_bytes() const;
  std::size_t peak_activation_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trident
