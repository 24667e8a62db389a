#include "model/activation_arena.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/attention.hpp"
#include "model/families.hpp"
#include "model/moe_mlp.hpp"
#include "model/tp_shape.hpp"

namespace trident {

namespace {

// Carves the stash tensors out of `base` in order; returns the number of floats used. With a null
// base it only counts, so the size and the layout come from the same list.
template <class Block>
std::size_t carve(float* base, const ModelConfig& cfg, int B, int tp_size, const ModelChunk& chunk,
                  StashContent content, bool sequence_parallel, bool bf16_product_inputs, int expert_ranks,
                  Activations<Block>& a) {
  const std::size_t T = cfg.seq_len, C = cfg.d_model, BT = B * T;
  const TpShape local(cfg, 0, tp_size);  // every TP rank stashes the same amount
  // Selective recomputation rebuilds the explicit kernel's probabilities; what the tiled one saves
  // is already linear in T.
  const bool rebuilt =
      content == StashContent::without_probabilities && cfg.attention == AttentionKernel::explicit_probabilities;
  StashShape shape{local,
                   static_cast<std::size_t>(B),
                   T,
                   C,
                   sequence_parallel ? BT / tp_size : BT,
                   rebuilt ? 0 : attention_saved_floats(attention_heads(cfg, B, tp_size)),
                   bf16_product_inputs};
  const std::size_t V = shape.local.vocab_rows, R = shape.stream_rows;
  std::size_t used = 0;
  auto take = [&](std::size_t count) {
    float* p = base ? base + used : nullptr;
    used += count;
    return p;
  };
  // Under full recomputation the embedding chunk keeps its token ids only.
  a.encoded = content == StashContent::inputs && chunk.embedding ? nullptr : take(R * C);
  if (content == StashContent::inputs) return used;
  a.layers.resize(chunk.num_layers);
  for (int i = 0; i < chunk.num_layers; ++i) {
    shape.mixture = moe_shape(cfg, chunk.first_layer + i, R, expert_ranks);
    Block::carve(a.layers[i], shape, take);
  }
  if (!chunk.head) return used;
  a.final_norm = shape.product_input(take, R * C);
  a.final_norm_mean = Block::kLayerNorm ? take(R) : nullptr;
  a.final_norm_rstd = take(R);
  a.probs = take(BT * V);
  a.losses = take(BT);
  return used;
}

template <class Block>
std::size_t stash_floats(const ModelConfig& cfg, int micro_batch_size, int tp_size, const ModelChunk& chunk,
                         StashContent content, bool sequence_parallel, bool bf16_product_inputs, int expert_ranks) {
  Activations<Block> layout;
  return carve(nullptr, cfg, micro_batch_size, tp_size, chunk, content, sequence_parallel, bf16_product_inputs,
               expert_ranks, layout);
}

// Token ids kept with the floats: the inputs of the embedding chunk, and under recomputation the
// targets of the head chunk.
std::size_t stashed_ids(const ModelConfig& cfg, int micro_batch_size, const ModelChunk& chunk, StashContent content) {
  const std::size_t tokens = static_cast<std::size_t>(micro_batch_size) * cfg.seq_len;
  const bool targets = content == StashContent::inputs && chunk.head;
  return tokens * ((chunk.embedding ? 1 : 0) + (targets ? 1 : 0));
}

}  // namespace

std::size_t stash_bytes(const ModelConfig& cfg, int micro_batch_size, int tp_size, const ModelChunk& chunk,
                        StashContent content, bool sequence_parallel, bool bf16_product_inputs, int expert_ranks) {
  const std::size_t floats = with_family(cfg.family, [&]<class Family>(Family) {
    return stash_floats<typename Family::Block>(cfg, micro_batch_size, tp_size, chunk, content, sequence_parallel,
                                                bf16_product_inputs, expert_ranks);
  });
  return floats * sizeof(float) + stashed_ids(cfg, micro_batch_size, chunk, content) * sizeof(int);
}

std::size_t stash_bytes(const ModelConfig& cfg, int micro_batch_size, int tp_size) {
  return stash_bytes(cfg, micro_batch_size, tp_size, whole_model(cfg));
}

template <class Block>
ActivationArena<Block>::ActivationArena(const ModelConfig& cfg, int micro_batch_size, int tp_size,
                                        const ModelChunk& chunk, StashContent content, ActivationMemory* memory,
                                        bool sequence_parallel, bool bf16_product_inputs, int expert_ranks)
    : cfg_(cfg),
      micro_batch_size_(micro_batch_size),
      tp_size_(tp_size),
      chunk_(chunk),
      content_(content),
      memory_(memory),
      sequence_parallel_(sequence_parallel),
      bf16_product_inputs_(bf16_product_inputs),
      expert_ranks_(expert_ranks),
      slot_floats_(
          stash_floats<Block>(cfg, micro_batch_size, tp_size, chunk, content, sequence_parallel, bf16_product_inputs,
                              expert_ranks)),
      slot_bytes_(
          stash_bytes(cfg, micro_batch_size, tp_size, chunk, content, sequence_parallel, bf16_product_inputs,
                      expert_ranks)) {}

template <class Block>
typename ActivationArena<Block>::Slot ActivationArena<Block>::make_slot() const {
  Slot slot;
  slot.floats = FloatBuffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("activations")), slot_floats_);
  carve(slot.floats.data(), cfg_, micro_batch_size_, tp_size_, chunk_, content_, sequence_parallel_,
        bf16_product_inputs_, expert_ranks_, slot.activations);
  const std::size_t tokens = static_cast<std::size_t>(micro_batch_size_) * cfg_.seq_len;
  if (chunk_.embedding) slot.activations.tokens = IntBuffer("activation_tokens", tokens);
  if (content_ == StashContent::inputs && chunk_.head) slot.activations.targets = IntBuffer("activation_targets", tokens);
  return slot;
}

template <class Block>
typename ActivationArena<Block>::Slot* ActivationArena<Block>::find(int microbatch) {
  for (Slot& slot : slots_)
    if (slot.in_use && slot.microbatch == microbatch) return &slot;
  return nullptr;
}

template <class Block>
Activations<Block>& ActivationArena<Block>::acquire(int microbatch) {
  if (find(microbatch))
    throw std::logic_error("micro-batch " + std::to_string(microbatch) + " is already in flight");
  Slot* free = nullptr;
  for (Slot& slot : slots_)
    if (!slot.in_use) free = &slot;
  if (!free) free = &slots_.emplace_back(make_slot());
  free->in_use = true;
  free->microbatch = microbatch;
  ++in_flight_;
  peak_in_flight_ = std::max(peak_in_flight_, in_flight_);
  if (memory_) {
    memory_->current += slot_bytes_;
    memory_->peak = std::max(memory_->peak, memory_->current);
  }
  return free->activations;
}

template <class Block>
Activations<Block>& ActivationArena<Block>::stash(int microbatch) {
  Slot* slot = find(microbatch);
  if (!slot) throw std::logic_error("micro-batch " + std::to_string(microbatch) + " is not in flight");
  return slot->activations;
}

template <class Block>
void ActivationArena<Block>::release(int microbatch) {
  Slot* slot = find(microbatch);
  if (!slot) throw std::logic_error("micro-batch " + std::to_string(microbatch) + " is not in flight");
  slot->in_use = false;
  --in_flight_;
  if (memory_) memory_->current -= slot_bytes_;
}

template class ActivationArena<Gpt2Block>;
template class ActivationArena<LlamaBlock>;

}  // namespace trident
