// What a layer's forward and backward read besides its weights, its stash and its input: the shape
// of one micro-batch on this tensor-parallel rank, the TP group its collectives run in, the GEMM
// context its products go through, and the scratch its backward writes activation gradients into.
// The model builds one and hands it to every layer (model/gpt2_block.hpp), so a layer has no
// hidden inputs.
#pragma once

#include <cstddef>

#include "comm/comm.hpp"
#include "kernels/gemm.hpp"
#include "kernels/rope.hpp"
#include "model/tp_shape.hpp"

namespace trident {

// When a backward pass computes the weight gradients: during it, or later in a separate W pass
// (zero-bubble schedules split backward into input gradient I and weight gradient W).
enum class WeightGrads { now, deferred };

// Activation gradients inside one layer's backward. Micro-batches run backward one at a time, so
// one set serves them all. Under selective recomputation `att` holds the attention probabilities a
// layer's stash does not keep: written by its forward, rebuilt from q and k by its backward.
struct BackwardScratch {
  float* att;    // [B, H/tp, T, T] attention probabilities (selective recomputation only, else null)
  float* dln;    // [B, T, C]       gradient w.r.t. a norm's output
  float* datty;  // [B, T, C/tp]    gradient w.r.t. the attention output
  float* datt;   // [B, H/tp, T, T] gradient w.r.t. the attention probabilities
  float* dfch;   // [B, T, F/tp]    gradient w.r.t. the MLP's hidden layer (Llama: then its gate)
  float* dqkv;   // [B, T, 3C/tp]   gradient w.r.t. q, k and v (weights now)
  float* dup;    // [B, T, F/tp]    Llama: gradient w.r.t. the MLP's up projection (weights now)
};

struct LayerContext {
  int B, T, C;
  TpShape local;
  Comm& tp;
  GemmContext& gemm;
  BackwardScratch scratch;
  const RopeTable* rope = nullptr;  // Llama: the rotary embedding's angles
  float norm_eps = 1e-5f;           // Llama: RMSNorm epsilon

  int rows() const { return B * T; }
  std::size_t hidden_floats() const { return static_cast<std::size_t>(B) * T * C; }  // one [B, T, C] tensor

  // A term added before a TP all-reduce of partial sums (a row-parallel bias, the position
  // embedding) is added by TP rank 0 alone, so that the sum counts it once.
  const float* once(const float* term) const { return tp.rank() == 0 ? term : nullptr; }
};

}  // namespace trident
