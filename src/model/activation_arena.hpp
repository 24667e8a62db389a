// The activations one micro-batch's forward pass stashes for its backward pass, and the arena
// that holds one stash per micro-batch in flight. A stash is one flat float buffer carved into
// named tensors (llm.c's ActivationTensors) plus the micro-batch's input tokens. It covers one
// model chunk (model_chunk.hpp): its input, its blocks (each block type's Stash record), and the
// head's tensors when it has the head. Both are templates over the block type (Gpt2Block or
// LlamaBlock); stash_bytes picks the family's.
//
// Under full recomputation a second arena keeps only each chunk's inputs (StashContent::inputs):
// the input hidden states (or tokens) and the targets, from which backward re-runs the forward.
// Under selective recomputation the stash leaves out the [B, H/tp, T, T] attention probabilities
// (StashContent::without_probabilities), which each layer's backward rebuilds from q and k.
//
// plan/memory.cpp counts the tensors of the lists below and of each block's Stash with its own
// formula; tests/train/plan_matches_model_test.cpp holds the two equal.
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

#include "deck/config.hpp"
#include "kernels/device.hpp"
#include "model/gpt2_block.hpp"
#include "model/llama_block.hpp"
#include "model/model_chunk.hpp"

namespace trident {

template <class Block>
struct Activations {
  // R: the residual stream's rows, B·T (or B·T/tp under sequence parallelism).
  float* encoded;  // [R, C] the chunk's input: token (+ position) embedding, or the previous chunk's output
  std::vector<typename Block::Stash> layers;  // the chunk's blocks, in order
  ProductInput final_norm;                    // [R, C]   (head chunk only, like the four below)
  float* final_norm_mean;                     // [R]      LayerNorm families only
  float* final_norm_rstd;                     // [R]
  float* probs;     // [B, T, ⌈V/tp⌉] this TP rank's logits, then softmax − onehot(target)
                    // (see kernels/cross_entropy.hpp); padding columns are never written
  float* losses;    // [B, T]
  IntBuffer tokens;   // [B, T] input tokens (int32), for the embedding's backward pass (embedding chunk)
  IntBuffer targets;  // [B, T] targets (inputs stash of the head chunk only: the loss is recomputed)
  TokenPositions positions;  // the micro-batch's position ids and documents (they outlive the step's passes)
};

// all: everything backward reads; inputs: the chunk's inputs only (full recomputation);
// without_probabilities: all but the attention probabilities (selective recomputation).
enum class StashContent { all, inputs, without_probabilities };

// Bytes of one micro-batch's stash of `chunk` (default: the whole model) on each rank of a TP
// group of tp_size (with sequence_parallel: the stream's tensors hold 1/tp_size of the rows; with
// bf16_product_inputs, under train.precision = "bf16": the activations only products read in bf16).
std::size_t stash_bytes(const ModelConfig& cfg, int micro_batch_size, int tp_size = 1);
// expert_ranks: parallel.ep, over which a mixture's experts are split ([model.moe]).
std::size_t stash_bytes(const ModelConfig& cfg, int micro_batch_size, int tp_size, const ModelChunk& chunk,
                        StashContent content = StashContent::all, bool sequence_parallel = false,
                        bool bf16_product_inputs = false, int expert_ranks = 1);

// Activation bytes held by all the arenas of one rank, and their high-water mark. `resident`
// counts what the rank holds for its whole life on top (selective recomputation's buffer for one
// layer's attention probabilities): it belongs to the peak, not to what is in flight.
struct ActivationMemory {
  std::size_t current = 0;
  std::size_t peak = 0;
  std::size_t resident = 0;
};

template <class Block>
class ActivationArena {
 public:
  // `memory` (optional) is shared by the arenas of one rank so that their total peak is known.
  ActivationArena(const ModelConfig& cfg, int micro_batch_size, int tp_size, const ModelChunk& chunk,
                  StashContent content = StashContent::all, ActivationMemory* memory = nullptr,
                  bool sequence_parallel = false, bool bf16_product_inputs = false, int expert_ranks = 1);
  ActivationArena(const ModelConfig& cfg, int micro_batch_size, int tp_size)
      : ActivationArena(cfg, micro_batch_size, tp_size, whole_model(cfg)) {}

  // The stash for `microbatch`, which must not be in flight yet. A free slot is reused; memory is
  // allocated only when every slot is in use, so a steady state of micro-batches allocates nothing.
  Activations<Block>& acquire(int microbatch);
  // The stash of a micro-batch in flight.
  Activations<Block>& stash(int microbatch);
  // Frees the slot of a micro-batch in flight for reuse.
  void release(int microbatch);

  std::size_t current_bytes() const { return in_flight_ * slot_bytes_; }
  std::size_t peak_bytes() const { return peak_in_flight_ * slot_bytes_; }

 private:
  struct Slot {
    FloatBuffer floats;
    Activations<Block> activations;
    bool in_use = false;
    int microbatch = 0;
  };
  Slot* find(int microbatch);
  Slot make_slot() const;

  ModelConfig cfg_;
  int micro_batch_size_;
  int tp_size_;
  ModelChunk chunk_;
  StashContent content_;
  ActivationMemory* memory_;
  bool sequence_parallel_;
  bool bf16_product_inputs_;
  int expert_ranks_;
  std::size_t slot_floats_;
  std::size_t slot_bytes_;
  std::deque<Slot> slots_;  // a deque keeps references to slots valid as it grows
  std::size_t in_flight_ = 0;
  std::size_t peak_in_flight_ = 0;
};

}  // namespace trident
