// One Llama transformer block (Hugging Face LlamaDecoderLayer) as a forward/backward pair, with the
// same shape as Gpt2Block (model/gpt2_block.hpp) so that the model composes either:
//   x2 = x + o_proj(attention(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1))),  n1 = RMSNorm(x)
//   out = x2 + down_proj(silu(gate_proj(n2)) · up_proj(n2)),                      n2 = RMSNorm(x2)
// No biases; weights in nn.Linear's [out, in] layout, as Hugging Face stores them. Grouped-query
// attention: query head h reads kv head ⌊h / (heads / kv_heads)⌋. Tensor parallel as Megatron:
// q, k, v (by heads), gate and up column-parallel; o_proj and down_proj row-parallel, their outputs
// all-reduced over the TP group in forward; RMSNorms replicated. q_proj, k_proj and v_proj lie one
// after the other in the parameter buffer (on every TP rank, its heads of each), so they are one
// [(H + 2·KV)/tp · hd, C] weight and one product, each token's output row q | k | v; gate_proj and
// up_proj likewise one [2F/tp, C] weight, gate | up. In a mixture layer ([model.moe]) a mixture of
// experts takes the MLP's place (model/moe_mlp.hpp), its weights and stash in `moe`; the MLP's are
// then null.
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

struct LlamaBlock {
  // The family's norms (the final one too) are RMSNorms: weight only, rstd kept.
  static constexpr bool kLayerNorm = false;

  struct Weights {
    float* input_norm;
    float* qkv_proj;  // q_proj, k_proj, v_proj, one after the other
    float* o_proj;
    float* post_attention_norm;
    float* gate_up_proj;  // gate_proj, up_proj, one after the other
    float* down_proj;
    MoeWeights moe = {};  // a mixture layer's router and experts
  };

  // What forward keeps for backward, one micro-batch (plan/memory.cpp counts the same list).
  struct Stash {
    ProductInput norm1;  // [R, C]  input_layernorm output (R: the stream's rows, as in Gpt2Block)
    float* norm1_rstd;  // [R]
    float* qkv;         // [B, T, (H + 2·KV)/tp · hd]  each token's q | k | v, q and k after RoPE
    float* att;         // what attention keeps: [B, H/tp, T] log-sum-exps (tiled) or [B, H/tp, T, T] probabilities
    float* atty;        // [B, T, H/tp · hd]   attention output, before o_proj
    float* residual2;   // [R, C]  residual stream after attention
    ProductInput norm2;  // [R, C]  post_attention_layernorm output (fp32 in a mixture layer: the router reads it)
    float* norm2_rstd;  // [R]
    float* gate_up;     // [B, T, 2F/tp]  each token's gate | up
    ProductInput h;     // [B, T, F/tp]   silu(gate) · up: bf16 under train.precision = "bf16"
    MoeStash moe;       // a mixture layer's, in place of gate_up and h
    float* residual3;   // [R, C]  block output
  };

  // Gradients w.r.t. the outputs of the block's projections (q and k before RoPE), as in Gpt2Block.
  struct OutputGrads {
    float* mlp_out;   // [B, T, C]      down_proj's
    float* gate_up;   // [B, T, 2F/tp]  gate | up (bf16 in its first half under bf16: llama_block.cpp)
    float* attn_out;  // [B, T, C]      o_proj's
    float* qkv;       // [B, T, (H + 2·KV)/tp · hd]  q | k | v
  };

  // The norms' weights (d_model floats each): sequence parallelism sums their gradients over TP.
  static std::vector<float*> norm_tensors(const Weights& w) { return {w.input_norm, w.post_attention_norm}; }

  // Floats of one token's q | k | v on a TP rank.
  static std::size_t qkv_width(const TpShape& local) {
    return static_cast<std::size_t>(local.heads + 2 * local.kv_heads) * local.head_dim;
  }
  static Weights tensors(const FloatBuffer& buffer, const ParamStore& params, const std::string& prefix);

  static OutputGrads in_place(const LayerContext& ctx, float* dresidual) {
    float* out = ctx.output_grads(dresidual);
    return {out, ctx.scratch.dfch, out, ctx.scratch.dqkv};
  }

  // Without it (selective recomputation, explicit kernel) att is null: the layer uses ctx.scratch.att.
  template <class Take>
  static void carve(Stash& x, const StashShape& shape, Take&& take);
  template <class Take>
  static void carve(OutputGrads& g, const TpShape& local, std::size_t rows, std::size_t C, Take&& take);

  static void forward(const LayerContext& ctx, const Weights& w, const Stash& x, const float* input);
  static void backward(const LayerContext& ctx, const Weights& w, const Weights& dw, const Stash& x, const float* input,
                       float* dresidual, const OutputGrads& kept, WeightGrads when);
  static void weight_grad(const LayerContext& ctx, const Weights& dw, const Stash& x, const OutputGrads& kept);

  enum class Linear { down, gate_up, o, qkv };
  static void linear_weight_grad(Linear layer, const LayerContext& ctx, const Weights& dw, const Stash& x,
                                 const OutputGrads& kept);
};

template <class Take>
void LlamaBlock::carve(Stash& x, const StashShape& shape, Take&& take) {
  const TpShape& local = shape.local;
  const std::size_t BT = shape.rows(), R = shape.stream_rows, C = shape.C;
  const std::size_t hd = local.head_dim, f = local.mlp_width;
  x.norm1 = shape.product_input(take, R * C);
  x.norm1_rstd = take(R);
  x.qkv = take(BT * qkv_width(local));
  x.att = shape.attention_saved > 0 ? take(shape.attention_saved) : nullptr;
  x.atty = take(BT * local.heads * hd);
  x.residual2 = take(R * C);
  if (shape.mixture.experts > 0) {
    x.norm2 = take(R * C);
    x.norm2_rstd = take(R);
    x.gate_up = nullptr;
    x.h = nullptr;
    x.moe.carve(shape.mixture, R, C, take, [&](std::size_t n) { return shape.product_input(take, n); });
  } else {
    x.norm2 = shape.product_input(take, R * C);
    x.norm2_rstd = take(R);
    x.gate_up = take(BT * 2 * f);
    x.h = shape.product_input(take, BT * f);
    x.moe = {};
  }
  x.residual3 = take(R * C);
}

template <class Take>
void LlamaBlock::carve(OutputGrads& g, const TpShape& local, std::size_t rows, std::size_t C, Take&& take) {
  g.mlp_out = take(rows * C);
  g.gate_up = take(rows * 2 * local.mlp_width);
  g.attn_out = take(rows * C);
  g.qkv = take(rows * qkv_width(local));
}

}  // namespace trident
