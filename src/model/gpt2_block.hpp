// One GPT-2 transformer block (pre-LN) as a forward/backward pair, in the style of llm.c:
//   x2 = x + attn.c_proj(attention(attn.c_attn(ln_1(x))));   out = x2 + mlp.c_proj(gelu(mlp.c_fc(ln_2(x2))))
// Tensor parallel as Megatron-LM: c_attn and c_fc are column-parallel (this rank's heads and MLP
// columns), the two c_proj are row-parallel and their outputs are all-reduced over the TP group in
// forward; in backward the gradient entering each column-parallel layer from its input is summed
// over TP. LayerNorms, the residual stream and the c_proj biases are replicated.
//
// Everything the block is lives here: its parameters (names and TP split), what its forward
// stashes for backward (Stash; plan/memory.cpp's formula counts the same tensors, and
// tests/train/plan_matches_model_test.cpp holds the two equal), and the
// gradients its weight-gradient GEMMs read besides the stash (OutputGrads, kept from I until W when
// a zero-bubble schedule defers them). A model family is a set of such blocks behind this shape.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "deck/config.hpp"
#include "kernels/device.hpp"
#include "model/layer_context.hpp"
#include "model/param_store.hpp"
#include "model/tp_shape.hpp"

namespace trident {

struct Gpt2Block {
  // The family's norms (the final one too) are LayerNorms: weight and bias, mean and rstd kept.
  static constexpr bool kLayerNorm = true;

  // Pointers to the block's tensors in one flat buffer: the values, or the gradients.
  struct Weights {
    float *ln_1_weight, *ln_1_bias;
    float *c_attn_weight, *c_attn_bias;
    float *attn_proj_weight, *attn_proj_bias;
    float *ln_2_weight, *ln_2_bias;
    float *c_fc_weight, *c_fc_bias;
    float *mlp_proj_weight, *mlp_proj_bias;
  };

  // What forward keeps for backward, one micro-batch. R: the residual stream's rows, B·T (or B·T/tp
  // under sequence parallelism).
  struct Stash {
    ProductInput ln1;  // [R, C]      ln_1 output (a ProductInput: bf16 or fp32)
    float* ln1_mean;   // [R]
    float* ln1_rstd;   // [R]
    float* qkv;        // [B, T, 3C/tp]      this TP rank's heads of q, k and v
    float* att;        // what attention keeps: [B, H/tp, T] log-sum-exps (tiled) or [B, H/tp, T, T] probabilities
    float* atty;       // [B, T, C/tp]       attention output, before c_proj
    float* residual2;  // [R, C]      residual stream after attention
    ProductInput ln2;  // [R, C]
    float* ln2_mean;   // [R]
    float* ln2_rstd;   // [R]
    float* fch;        // [B, T, 4C/tp] c_fc output, before GELU
    ProductInput fch_gelu;  // [B, T, 4C/tp]   gelu(fch): bf16 under train.precision = "bf16"
    float* residual3;  // [R, C]      block output
  };

  // Gradients w.r.t. the outputs of the block's linear layers: what its weight gradients read
  // besides the stash. Where one points at the dresidual buffer backward is given, it is used in
  // place (weights now); elsewhere backward keeps a copy there (weights deferred).
  struct OutputGrads {
    float* mlp_out;   // [B, T, C]      the block output's (mlp c_proj's output)
    float* fch;       // [B, T, 4C/tp]  c_fc's output
    float* attn_out;  // [B, T, C]      attn c_proj's output
    float* qkv;       // [B, T, 3C/tp]  c_attn's output
  };

  // The norms' tensors (d_model floats each): sequence parallelism sums their gradients over TP.
  static std::vector<float*> norm_tensors(const Weights& w) {
    return {w.ln_1_weight, w.ln_1_bias, w.ln_2_weight, w.ln_2_bias};
  }

  // Pointers into `buffer` (params.values or params.grads) for the block's tensors, named `prefix` +
  // their description's names (family/gpt2.cpp).
  static Weights tensors(const FloatBuffer& buffer, const ParamStore& params, const std::string& prefix);

  // Where backward keeps the output gradients when the weights are done now: in dresidual and the
  // context's scratch.
  static OutputGrads in_place(const LayerContext& ctx, float* dresidual) {
    float* out = ctx.output_grads(dresidual);
    return {out, ctx.scratch.dfch, out, ctx.scratch.dqkv};
  }

  // Carves a stash out of consecutive floats: take(n) returns the next n; with take returning
  // null it only counts (stash_bytes, the size of an arena slot).
  // Without it (selective recomputation, explicit kernel) att is null: the layer uses ctx.scratch.att.
  template <class Take>
  static void carve(Stash& x, const StashShape& shape, Take&& take);
  template <class Take>
  static void carve(OutputGrads& g, const TpShape& local, std::size_t rows, std::size_t C, Take&& take);

  // Writes x.residual3, the block output, from `input` [B, T, C].
  static void forward(const LayerContext& ctx, const Weights& w, const Stash& x, const float* input);
  // dresidual: on entry the gradient w.r.t. the block output, on return w.r.t. `input`. LayerNorm
  // weight gradients accumulate into dw now; the linear layers' accumulate now or wait for
  // weight_grad() with the same `kept`.
  static void backward(const LayerContext& ctx, const Weights& w, const Weights& dw, const Stash& x, const float* input,
                       float* dresidual, const OutputGrads& kept, WeightGrads when);
  static void weight_grad(const LayerContext& ctx, const Weights& dw, const Stash& x, const OutputGrads& kept);

  enum class Linear { mlp_proj, c_fc, attn_proj, c_attn };
  static void linear_weight_grad(Linear layer, const LayerContext& ctx, const Weights& dw, const Stash& x,
                                 const OutputGrads& kept);
};

template <class Take>
void Gpt2Block::carve(Stash& x, const StashShape& shape, Take&& take) {
  const TpShape& local = shape.local;
  const std::size_t BT = shape.rows(), R = shape.stream_rows, C = shape.C;
  const std::size_t attn = local.attn_width, mlp = local.mlp_width;
  x.ln1 = shape.product_input(take, R * C);
  x.ln1_mean = take(R);
  x.ln1_rstd = take(R);
  x.qkv = take(3 * BT * attn);
  x.att = shape.attention_saved > 0 ? take(shape.attention_saved) : nullptr;
  x.atty = take(BT * attn);
  x.residual2 = take(R * C);
  x.ln2 = shape.product_input(take, R * C);
  x.ln2_mean = take(R);
  x.ln2_rstd = take(R);
  x.fch = take(BT * mlp);
  x.fch_gelu = shape.product_input(take, BT * mlp);
  x.residual3 = take(R * C);
}

template <class Take>
void Gpt2Block::carve(OutputGrads& g, const TpShape& local, std::size_t rows, std::size_t C, Take&& take) {
  g.mlp_out = take(rows * C);
  g.fch = take(rows * local.mlp_width);
  g.attn_out = take(rows * C);
  g.qkv = take(3 * rows * local.attn_width);
}

}  // namespace trident
