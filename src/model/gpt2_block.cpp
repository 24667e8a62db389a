#include "model/gpt2_block.hpp"

#include "kernels/attention.hpp"
#include "kernels/copy.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/linear.hpp"
#include "kernels/residual.hpp"
#include "model/block.hpp"

namespace trident {

namespace {

// c_attn's q | k | v and the attention output of this rank's heads, masked as the micro-batch's
// documents say.
AttentionShape attention_shape(const LayerContext& ctx) {
  AttentionShape shape = AttentionShape::fused_qkv(ctx.B, ctx.T, ctx.local.attn_width, ctx.local.heads, ctx.attention);
  shape.documents = ctx.positions.documents;
  return shape;
}

}  // namespace

Gpt2Block::Weights Gpt2Block::tensors(const FloatBuffer& buffer, const ParamStore& params, const std::string& prefix) {
  auto at = [&](const std::string& name) { return params.find(prefix + name).in(buffer); };
  return {at("ln_1.weight"),        at("ln_1.bias"),        at("attn.c_attn.weight"), at("attn.c_attn.bias"),
          at("attn.c_proj.weight"), at("attn.c_proj.bias"), at("ln_2.weight"),        at("ln_2.bias"),
          at("mlp.c_fc.weight"),    at("mlp.c_fc.bias"),    at("mlp.c_proj.weight"),  at("mlp.c_proj.bias")};
}

void Gpt2Block::forward(const LayerContext& ctx, const Weights& w, const Stash& x, const float* input) {
  const int BT = ctx.rows(), R = ctx.local_rows(), C = ctx.C, attn = ctx.local.attn_width, mlp = ctx.local.mlp_width;
  // Row-parallel linear C' → C: this rank's input features times its rows of w, summed over TP.
  auto row_parallel = [&](float* y, Operand in, const float* weight, const float* bias, int in_features) {
    float* partial = ctx.partial_rows(y, ctx.scratch.gathered);
    linear_forward(ctx.gemm, partial, in, weight, ctx.once(bias), BT, in_features, C);
    ctx.sum_rows(partial, y);
  };
  layernorm_forward(x.ln1, x.ln1_mean, x.ln1_rstd, input, w.ln_1_weight, w.ln_1_bias, R, C);
  linear_forward(ctx.gemm, x.qkv, ctx.gather_rows(x.ln1, ctx.scratch.gathered), w.c_attn_weight, w.c_attn_bias, BT, C,
                 3 * attn);
  ctx.attention_forward(x.atty, x.att, x.qkv, x.qkv + attn, x.qkv + 2 * attn, attention_shape(ctx));
  row_parallel(x.residual2, x.atty, w.attn_proj_weight, w.attn_proj_bias, attn);
  layernorm_forward(x.ln2, x.ln2_mean, x.ln2_rstd, NormInput::residual(x.residual2, x.residual2, input), w.ln_2_weight,
                    w.ln_2_bias, R, C);
  linear_gelu_forward(ctx.gemm, x.fch_gelu, x.fch, ctx.gather_rows(x.ln2, ctx.scratch.gathered), w.c_fc_weight,
                      w.c_fc_bias, BT, C, mlp);
  row_parallel(x.residual3, x.fch_gelu, w.mlp_proj_weight, w.mlp_proj_bias, mlp);
  residual_forward(x.residual3, x.residual3, x.residual2, ctx.local_floats());
}

void Gpt2Block::backward(const LayerContext& ctx, const Weights& w, const Weights& dw, const Stash& x,
                         const float* input, float* dresidual, const OutputGrads& kept, WeightGrads when) {
  const int BT = ctx.rows(), R = ctx.local_rows(), C = ctx.C, attn = ctx.local.attn_width, mlp = ctx.local.mlp_width;
  const BlockBackward<Gpt2Block> step(ctx, dw, x, dresidual, kept, when);
  // The residual connection passes dresidual on and each branch adds to it through its norm.
  step.gather_output_grad(kept.mlp_out);
  {
    const RoundedOnce rounded = step.rounded_for_both(kept.mlp_out, ctx.hidden_floats());
    // c_fc's bias gradient comes with its output gradient, taken back through the GELU.
    linear_backward_input_through_gelu(ctx.gemm, kept.fch, dw.c_fc_bias, kept.mlp_out, w.mlp_proj_weight, x.fch, BT,
                                       mlp, C);
    step.weight_grad_now(Linear::mlp_proj);
  }
  {
    const RoundedOnce rounded = step.rounded_for_both(kept.fch, static_cast<std::size_t>(BT) * mlp);
    linear_backward_input(ctx.gemm, step.dln(), kept.fch, w.c_fc_weight, BT, C, mlp);
    step.reduce_over_tp_during(Linear::c_fc);
  }
  layernorm_backward(dresidual, dw.ln_2_weight, dw.ln_2_bias, step.dln_sum(), x.residual2, x.ln2_mean, x.ln2_rstd,
                     w.ln_2_weight, R, C, ctx.scratch.column_sums);

  step.gather_output_grad(kept.attn_out);
  {
    const RoundedOnce rounded = step.rounded_for_both(kept.attn_out, ctx.hidden_floats());
    linear_backward_input(ctx.gemm, ctx.scratch.datty, kept.attn_out, w.attn_proj_weight, BT, attn, C);
    step.weight_grad_now(Linear::attn_proj);
  }
  // Under selective recomputation the probabilities are rebuilt from the stashed q and k.
  ctx.attention_backward(kept.qkv, kept.qkv + attn, kept.qkv + 2 * attn, ctx.scratch.datty, x.qkv, x.qkv + attn,
                         x.qkv + 2 * attn, x.atty, x.att, attention_shape(ctx));
  {
    const RoundedOnce rounded = step.rounded_for_both(kept.qkv, static_cast<std::size_t>(BT) * 3 * attn);
    linear_backward_input(ctx.gemm, step.dln(), kept.qkv, w.c_attn_weight, BT, C, 3 * attn);
    step.reduce_over_tp_during(Linear::c_attn);
  }
  layernorm_backward(dresidual, dw.ln_1_weight, dw.ln_1_bias, step.dln_sum(), input, x.ln1_mean, x.ln1_rstd,
                     w.ln_1_weight, R, C, ctx.scratch.column_sums);
}

void Gpt2Block::weight_grad(const LayerContext& ctx, const Weights& dw, const Stash& x, const OutputGrads& kept) {
  for (Linear layer : {Linear::mlp_proj, Linear::c_fc, Linear::attn_proj, Linear::c_attn})
    linear_weight_grad(layer, ctx, dw, x, kept);
}

void Gpt2Block::linear_weight_grad(Linear layer, const LayerContext& ctx, const Weights& dw, const Stash& x,
                                   const OutputGrads& kept) {
  const int BT = ctx.rows(), C = ctx.C, attn = ctx.local.attn_width, mlp = ctx.local.mlp_width;
  switch (layer) {
    case Linear::mlp_proj:
      return linear_backward_weight(ctx.gemm, dw.mlp_proj_weight, dw.mlp_proj_bias, x.fch_gelu, kept.mlp_out, BT, mlp,
                                    C);
    case Linear::c_fc:  // its bias gradient came with its output gradient (backward)
      return linear_backward_weight(ctx.gemm, dw.c_fc_weight, nullptr, ctx.gather_rows(x.ln2, ctx.scratch.gathered),
                                    kept.fch, BT, C, mlp);
    case Linear::attn_proj:
      return linear_backward_weight(ctx.gemm, dw.attn_proj_weight, dw.attn_proj_bias, x.atty, kept.attn_out, BT, attn,
                                    C);
    case Linear::c_attn:
      return linear_backward_weight(ctx.gemm, dw.c_attn_weight, dw.c_attn_bias,
                                    ctx.gather_rows(x.ln1, ctx.scratch.gathered), kept.qkv, BT, C, 3 * attn);
  }
}

}  // namespace trident
