// One Llama transformer block (Hugging Face LlamaDecoderLayer) as a forward/backward pair, with the
// same shape as Gpt2Block (model/gpt2_block.hpp) so that the model composes either:
//   x2 = x + o_proj(attention(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1))),  n1 = RMSNorm(x)
//   out = x2 + down_proj(silu(gate_proj(n2)) · up_proj(n2)),                      n2 = RMSNorm(x2)
// No biases; weights in nn.Linear's [out, in] layout, as Hugging Face stores them. Grouped-query
// attention: query head h reads kv head ⌊h / (heads / kv_heads)⌋. Tensor parallel as Megatron:
// q, k, v (by heads), gate and up column-parallel; o_proj and down_proj row-parallel, their outputs
// all-reduced over the TP group in forward; RMSNorms replicated.
#pragma once

#include <cstddef>
#include <initializer_list>
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
    float *q_proj, *k_proj, *v_proj, *o_proj;
    float* post_attention_norm;
    float *gate_proj, *up_proj, *down_proj;
  };

  // What forward keeps for backward, one micro-batch (plan/memory.cpp counts the same list).
  struct Stash {
    float* norm1;       // [R, C]  input_layernorm output (R: the stream's rows, as in Gpt2Block)
    float* norm1_rstd;  // [R]
    float* q;           // [B, T, H/tp · hd]   after RoPE
    float* k;           // [B, T, KV/tp · hd]  after RoPE
    float* v;           // [B, T, KV/tp · hd]
    float* att;         // what attention keeps: [B, H/tp, T] log-sum-exps (tiled) or [B, H/tp, T, T] probabilities
    float* atty;        // [B, T, H/tp · hd]   attention output, before o_proj
    float* residual2;   // [R, C]  residual stream after attention
    float* norm2;       // [R, C]  post_attention_layernorm output
    float* norm2_rstd;  // [R]
    float* gate;        // [B, T, F/tp]
    float* up;          // [B, T, F/tp]
    float* h;           // [B, T, F/tp]  silu(gate) · up
    float* residual3;   // [R, C]  block output
  };

  // Gradients w.r.t. the outputs of the block's projections (q and k before RoPE), as in Gpt2Block.
  struct OutputGrads {
    float* mlp_out;   // [B, T, C]      down_proj's
    float* gate;      // [B, T, F/tp]
    float* up;        // [B, T, F/tp]
    float* attn_out;  // [B, T, C]      o_proj's
    float* q;         // [B, T, H/tp · hd]
    float* k;         // [B, T, KV/tp · hd]
    float* v;         // [B, T, KV/tp · hd]
  };

  // The norms' weights (d_model floats each): sequence parallelism sums their gradients over TP.
  static std::vector<float*> norm_tensors(const Weights& w) { return {w.input_norm, w.post_attention_norm}; }

  static std::string prefix(int layer) { return "layers." + std::to_string(layer) + "."; }
  static std::string first_parameter(int layer) { return prefix(layer) + "input_layernorm.weight"; }
  static std::string last_parameter(int layer) { return prefix(layer) + "mlp.down_proj.weight"; }

  static void add_parameters(ParamStore& params, const ModelConfig& cfg, int layer);
  static Weights tensors(const FloatBuffer& buffer, const ParamStore& params, int layer);

  static OutputGrads in_place(const LayerContext& ctx, float* dresidual) {
    const std::size_t rows = ctx.rows();
    float* q = ctx.scratch.dqkv;
    float* k = q + rows * ctx.local.heads * ctx.local.head_dim;
    float* v = k + rows * ctx.local.kv_heads * ctx.local.head_dim;
    float* out = ctx.output_grads(dresidual);
    return {out, ctx.scratch.dfch, ctx.scratch.dup, out, q, k, v};
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

 private:
  enum class Linear { down, gate, up, o, q, k, v };
  static void linear_weight_grads(std::initializer_list<Linear> layers, const LayerContext& ctx, const Weights& dw,
                                  const Stash& x, const OutputGrads& kept);
};

template <class Take>
void LlamaBlock::carve(Stash& x, const StashShape& shape, Take&& take) {
  const TpShape& local = shape.local;
  const std::size_t BT = shape.rows(), R = shape.stream_rows, C = shape.C;
  const std::size_t hd = local.head_dim, f = local.mlp_width;
  x.norm1 = take(R * C);
  x.norm1_rstd = take(R);
  x.q = take(BT * local.heads * hd);
  x.k = take(BT * local.kv_heads * hd);
  x.v = take(BT * local.kv_heads * hd);
  x.att = shape.attention_saved > 0 ? take(shape.attention_saved) : nullptr;
  x.atty = take(BT * local.heads * hd);
  x.residual2 = take(R * C);
  x.norm2 = take(R * C);
  x.norm2_rstd = take(R);
  x.gate = take(BT * f);
  x.up = take(BT * f);
  x.h = take(BT * f);
  x.residual3 = take(R * C);
}

template <class Take>
void LlamaBlock::carve(OutputGrads& g, const TpShape& local, std::size_t rows, std::size_t C, Take&& take) {
  const std::size_t hd = local.head_dim;
  g.mlp_out = take(rows * C);
  g.gate = take(rows * local.mlp_width);
  g.up = take(rows * local.mlp_width);
  g.attn_out = take(rows * C);
  g.q = take(rows * local.heads * hd);
  g.k = take(rows * local.kv_heads * hd);
  g.v = take(rows * local.kv_heads * hd);
}

}  // namespace trident
