// What a model chunk keeps per micro-batch: its stash (and under full recomputation its inputs)
// and, between I and W of a zero-bubble schedule, its blocks' output gradients. Internal to the
// model module.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "model/activation_arena.hpp"
#include "model/backward_workspace.hpp"

namespace trident {

// One micro-batch's deferred weight gradients (between I and W of a zero-bubble schedule): each
// block's output gradients, kept in `storage`; the layers' inputs stay in the micro-batch's stash.
// The head's weight gradient reads the stash and the loss scale.
template <class Block>
struct DeferredWeightGrads {
  FloatBuffer storage;
  std::vector<typename Block::OutputGrads> blocks;  // the chunk's blocks, in order
  float loss_scale = 1.0f;
};

template <class Block>
struct ChunkState {
  ChunkState(const ModelConfig& cfg, int B, int tp_size, const ModelChunk& spec, Recompute recompute,
             bool sequence_parallel, bool bf16_product_inputs, ActivationMemory& memory, int expert_ranks)
      : spec(spec),
        stash(cfg, B, tp_size, spec,
              recompute == Recompute::selective ? StashContent::without_probabilities : StashContent::all, &memory,
              sequence_parallel, bf16_product_inputs, expert_ranks) {
    if (recompute == Recompute::full)
      inputs = std::make_unique<ActivationArena<Block>>(cfg, B, tp_size, spec, StashContent::inputs, &memory,
                                                        sequence_parallel);
  }
  ModelChunk spec;
  ActivationArena<Block> stash;
  std::unique_ptr<ActivationArena<Block>> inputs;  // recomputation: what forward keeps of each micro-batch
  std::map<int, DeferredWeightGrads<Block>> deferred;
};

// What block `index` of a chunk reads: the previous block's output, or the chunk's input (the
// embedding output, or the previous chunk's output).
template <class Block>
const float* block_input(const Activations<Block>& a, int index) {
  return index > 0 ? a.layers[index - 1].residual3 : a.encoded;
}

template <class Block>
const float* chunk_output(const ModelChunk& spec, const Activations<Block>& a) {
  return block_input(a, spec.num_layers);
}

}  // namespace trident
