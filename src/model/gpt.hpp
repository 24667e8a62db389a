// GPT-2 (DESIGN.md "Model"): embeddings, L pre-LN blocks, final LayerNorm, tied head, cross-entropy.
// Read top to bottom like llm.c's train_gpt2.c: forward() runs the layers in order and stashes
// what backward() needs in the activation arena; backward() runs them in reverse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "deck/config.hpp"
#include "kernels/device.hpp"
#include "model/param_store.hpp"

namespace trident {

class Gpt {
 public:
  // micro_batch_size sequences of cfg.seq_len tokens per forward/backward.
  Gpt(const ModelConfig& cfg, int micro_batch_size, std::uint64_t seed);
  ~Gpt();
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  // One micro-batch. inputs/targets: device buffers of micro_batch_size × seq_len token ids.
  // forward() returns the sum (not the mean) of the per-token cross-entropy losses;
  // backward() accumulates into params().grads the gradient of  loss_scale × (that sum),
  // so with loss_scale = 1 / (tokens in the global batch) the gradients of a step are those of
  // the mean loss over the global batch. Every forward() must be followed by its backward().
  double forward(const IntBuffer& inputs, const IntBuffer& targets);
  void backward(float loss_scale);

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
