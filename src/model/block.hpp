// The block interface, stated once (DESIGN.md "The layer seam"): what every model family's block
// type gives the model (model/transformer.cpp), checked at compile time by the TransformerBlock
// concept; and the steps every block's backward shares around its own products and kernels
// (BlockBackward). A new family's block is a type that satisfies the concept.
#pragma once

#include <concepts>
#include <cstddef>
#include <string>
#include <vector>

#include "deck/config.hpp"
#include "kernels/copy.hpp"
#include "kernels/device.hpp"
#include "kernels/gemm.hpp"
#include "model/activation_arena.hpp"
#include "model/layer_context.hpp"
#include "model/param_store.hpp"

namespace trident {

// A block type: its tensors in a flat buffer (Weights), what its forward keeps for its backward
// (Stash), the gradients of its linear layers' outputs that their weight gradients read (OutputGrads,
// kept from I until W when a zero-bubble schedule defers them), its linear layers (Linear), and the
// functions below.
template <class B>
concept TransformerBlock = requires(const LayerContext& ctx, const typename B::Weights& w, typename B::Stash& stash,
                                    const typename B::Stash& x, typename B::OutputGrads& grads,
                                    const typename B::OutputGrads& kept, float* dresidual, const float* input,
                                    const ParamStore& params, const FloatBuffer& buffer, const std::string& prefix,
                                    WeightGrads when, typename B::Linear linear, const StashShape& shape,
                                    const TpShape& local, std::size_t count, float* (*take)(std::size_t)) {
  { B::kLayerNorm } -> std::convertible_to<bool>;  // LayerNorms (weight, bias; mean, rstd) or RMSNorms
  { B::norm_tensors(w) } -> std::same_as<std::vector<float*>>;  // summed over TP under sequence parallelism
  // Its tensors (the family's description lists them) of the layer whose names start with `prefix`.
  { B::tensors(buffer, params, prefix) } -> std::same_as<typename B::Weights>;
  { B::in_place(ctx, dresidual) } -> std::same_as<typename B::OutputGrads>;  // weights done now
  B::carve(stash, shape, take);                                      // a stash out of consecutive floats
  B::carve(grads, local, count, count, take);
  B::forward(ctx, w, x, input);
  B::backward(ctx, w, w, x, input, dresidual, kept, when);
  B::weight_grad(ctx, w, x, kept);                                   // the deferred W
  B::linear_weight_grad(linear, ctx, w, x, kept);                    // one linear layer's
};

// The steps every block's backward takes around its own: the row-parallel layers' output gradient
// gathered (under sequence parallelism) and kept for the weight gradients, a linear layer's weight
// gradient now or deferred, and the TP sum of the gradient entering a column-parallel layer from its
// input overlapped with that layer's weight gradient.
template <class Block>
class BlockBackward {
 public:
  BlockBackward(const LayerContext& ctx, const typename Block::Weights& dw, const typename Block::Stash& x,
                float* dresidual, const typename Block::OutputGrads& kept, WeightGrads when)
      : ctx_(ctx),
        dw_(dw),
        x_(x),
        dresidual_(dresidual),
        kept_(kept),
        now_(when == WeightGrads::now),
        dln_(ctx.scratch.dln),
        dln_sum_(ctx.partial_rows(dln_, ctx.scratch.dln_local)) {}

  // The gradient a column-parallel layer's input-gradient product writes, this rank's share, and
  // where its sum over TP lands (the same buffer without sequence parallelism).
  float* dln() const { return dln_; }
  float* dln_sum() const { return dln_sum_; }

  // The row-parallel layers' output gradient: the stream's, gathered from the TP group under
  // sequence parallelism; kept where their weight gradients will read it. dresidual is the same on
  // every TP rank, so the row-parallel layers need no other communication in backward.
  void gather_output_grad(float* kept_grad) const {
    const float* grad = ctx_.gather_rows(dresidual_, ctx_.scratch.dgathered);
    if (kept_grad != grad) copy_floats(kept_grad, grad, ctx_.hidden_floats());
  }

  // `grad` (n floats), the output gradient of a linear layer whose two backward products are about to
  // read it, rounded once for both under bf16 when the weight gradient runs now (a deferred one
  // rounds its own when it runs): kernels/gemm.hpp's RoundedOnce, alive for the caller's scope.
  RoundedOnce rounded_for_both(const float* grad, std::size_t n) const {
    return RoundedOnce(ctx_.gemm, grad, now_ ? static_cast<long>(n) : 0);
  }

  void weight_grad_now(typename Block::Linear layer) const {
    if (now_) Block::linear_weight_grad(layer, ctx_, dw_, x_, kept_);
  }

  // The gradient entering a column-parallel layer from its input is this rank's share only: it is
  // summed over TP (Megatron's f operator in backward) while the layer's weight gradient runs.
  void reduce_over_tp_during(typename Block::Linear layer) const {
    const CommRequestPtr reduce = ctx_.sum_rows_async(dln_, dln_sum_);
    weight_grad_now(layer);
    reduce->wait();
  }

 private:
  const LayerContext& ctx_;
  const typename Block::Weights& dw_;
  const typename Block::Stash& x_;
  float* dresidual_;
  const typename Block::OutputGrads& kept_;
  bool now_;
  float* dln_;
  float* dln_sum_;
};

}  // namespace trident
