#include "model/llama_block.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/attention.hpp"
#include "kernels/copy.hpp"
#include "kernels/linear.hpp"
#include "kernels/matmul_precision.hpp"
#include "kernels/residual.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/swiglu.hpp"
#include "model/block.hpp"

namespace trident {

namespace {

constexpr WeightLayout kLinear = WeightLayout::out_in;

// Where q, k and v lie in a token's row of the fused q | k | v output (and of its gradient).
struct QkvColumns {
  int q_width, kv_width, width;
  explicit QkvColumns(const TpShape& local)
      : q_width(local.heads * local.head_dim),
        kv_width(local.kv_heads * local.head_dim),
        width(static_cast<int>(LlamaBlock::qkv_width(local))) {}
  float* k(float* qkv) const { return qkv + q_width; }
  float* v(float* qkv) const { return qkv + q_width + kv_width; }
};

AttentionShape attention_shape(const LayerContext& ctx) {
  const TpShape& local = ctx.local;
  const QkvColumns columns(local);
  return {ctx.B, ctx.T, local.heads, local.kv_heads, local.head_dim, columns.width, columns.width, columns.q_width,
          ctx.attention, ctx.positions.documents};
}

// kept.gate_up as SwiGLU's backward uses it (kernels/swiglu.hpp): d(gate | up) in bf16 under bf16.
SwigluGrads gate_up_grads(const LayerContext& ctx, float* kept) {
  return SwigluGrads(kept, ctx.rows(), ctx.local.mlp_width, ctx.gemm.precision() == MatmulPrecision::bf16);
}

}  // namespace

LlamaBlock::Weights LlamaBlock::tensors(const FloatBuffer& buffer, const ParamStore& params, const std::string& p) {
  auto at = [&](const std::string& name) { return params.find(p + name).in(buffer); };
  // The fused weights rely on their parts being adjacent, as the description lists them (family/llama.cpp).
  auto followed_by = [&](const std::string& first, const std::string& next) {
    const ParamTensor &a = params.find(p + first), &b = params.find(p + next);
    if (a.offset + a.size != b.offset)
      throw std::logic_error("LlamaBlock: " + p + next + " does not follow " + p + first + " in the parameter buffer");
  };
  followed_by("self_attn.q_proj.weight", "self_attn.k_proj.weight");
  followed_by("self_attn.k_proj.weight", "self_attn.v_proj.weight");
  Weights w{at("input_layernorm.weight"), at("self_attn.q_proj.weight"), at("self_attn.o_proj.weight"),
            at("post_attention_layernorm.weight"), nullptr, nullptr};
  if (params.try_find(p + "block_sparse_moe.gate.weight")) {
    // This rank's experts (all, or its share under expert parallelism) lie one after the other
    // (w1, w3, w2 each) right after the router.
    auto expert = [](int e) { return "block_sparse_moe.experts." + std::to_string(e) + "."; };
    int first = 0;
    while (!params.try_find(p + expert(first) + "w1.weight")) ++first;  // the router has experts
    std::string previous = "block_sparse_moe.gate.weight";
    for (int e = first; params.try_find(p + expert(e) + "w1.weight"); ++e) {
      followed_by(previous, expert(e) + "w1.weight");
      followed_by(expert(e) + "w1.weight", expert(e) + "w3.weight");
      followed_by(expert(e) + "w3.weight", expert(e) + "w2.weight");
      previous = expert(e) + "w2.weight";
    }
    w.moe = {at("block_sparse_moe.gate.weight"), at(expert(first) + "w1.weight")};
    return w;
  }
  followed_by("mlp.gate_proj.weight", "mlp.up_proj.weight");
  w.gate_up_proj = at("mlp.gate_proj.weight");
  w.down_proj = at("mlp.down_proj.weight");
  return w;
}

void LlamaBlock::forward(const LayerContext& ctx, const Weights& w, const Stash& x, const float* input) {
  const int BT = ctx.rows(), R = ctx.local_rows(), C = ctx.C, F = ctx.local.mlp_width;
  const QkvColumns qkv(ctx.local);
  // Row-parallel projection back to C: this rank's input features times its columns of w, summed over TP.
  auto row_parallel = [&](float* y, Operand in, const float* weight, int in_features) {
    float* partial = ctx.partial_rows(y, ctx.scratch.gathered);
    linear_forward(ctx.gemm, partial, in, weight, nullptr, BT, in_features, C, kLinear);
    ctx.sum_rows(partial, y);
  };
  rmsnorm_forward(x.norm1, x.norm1_rstd, input, w.input_norm, ctx.norm_eps, R, C);
  linear_forward(ctx.gemm, x.qkv, ctx.gather_rows(x.norm1, ctx.scratch.gathered), w.qkv_proj, nullptr, BT, C,
                 qkv.width, kLinear);
  rope_rotate(x.qkv, *ctx.rope, ctx.B, ctx.T, ctx.local.heads, qkv.width, +1, ctx.positions.ids);
  rope_rotate(qkv.k(x.qkv), *ctx.rope, ctx.B, ctx.T, ctx.local.kv_heads, qkv.width, +1, ctx.positions.ids);
  ctx.attention_forward(x.atty, x.att, x.qkv, qkv.k(x.qkv), qkv.v(x.qkv), attention_shape(ctx));
  row_parallel(x.residual2, x.atty, w.o_proj, qkv.q_width);
  rmsnorm_forward(x.norm2, x.norm2_rstd, NormInput::residual(x.residual2, x.residual2, input), w.post_attention_norm,
                  ctx.norm_eps, R, C);
  if (w.moe.router) return moe_forward(ctx, w.moe, x.moe, x.norm2.fp32, x.residual2, x.residual3);
  linear_forward(ctx.gemm, x.gate_up, ctx.gather_rows(x.norm2, ctx.scratch.gathered), w.gate_up_proj, nullptr, BT, C,
                 2 * F, kLinear);
  swiglu_forward(x.h, x.gate_up, BT, F);
  row_parallel(x.residual3, x.h, w.down_proj, F);
  residual_forward(x.residual3, x.residual3, x.residual2, ctx.local_floats());
}

namespace {

// The MLP's (or the mixture's) backward from the stream's gradient: returns the gradient w.r.t.
// post_attention_layernorm's output, summed over TP.
const float* mlp_backward(const LayerContext& ctx, const LlamaBlock::Weights& w, const LlamaBlock::Weights& dw,
                          const BlockBackward<LlamaBlock>& step, const LlamaBlock::Stash& x, float* dresidual,
                          const LlamaBlock::OutputGrads& kept) {
  if (w.moe.router) {  // on the stream's rows, whole on every TP rank: nothing to gather or sum
    moe_backward(ctx, w.moe, dw.moe, x.moe, x.norm2.fp32, dresidual, step.dln());
    return step.dln();
  }
  const int BT = ctx.rows(), C = ctx.C, F = ctx.local.mlp_width;
  step.gather_output_grad(kept.mlp_out);
  const SwigluGrads grads = gate_up_grads(ctx, kept.gate_up);
  {
    const RoundedOnce rounded = step.rounded_for_both(kept.mlp_out, ctx.hidden_floats());
    linear_backward_input(ctx.gemm, grads.dh, kept.mlp_out, w.down_proj, BT, F, C, kLinear,
                          static_cast<int>(grads.dh_ld));
    step.weight_grad_now(LlamaBlock::Linear::down);
  }
  swiglu_backward(grads.d_gate_up, grads.dh, grads.dh_ld, x.gate_up, BT, F);
  linear_backward_input(ctx.gemm, step.dln(), grads.d_gate_up, w.gate_up_proj, BT, C, 2 * F, kLinear);
  step.reduce_over_tp_during(LlamaBlock::Linear::gate_up);
  return step.dln_sum();
}

}  // namespace

void LlamaBlock::backward(const LayerContext& ctx, const Weights& w, const Weights& dw, const Stash& x,
                          const float* input, float* dresidual, const OutputGrads& kept, WeightGrads when) {
  const int BT = ctx.rows(), R = ctx.local_rows(), C = ctx.C;
  const QkvColumns qkv(ctx.local);
  const BlockBackward<LlamaBlock> step(ctx, dw, x, dresidual, kept, when);
  const float* dnorm2 = mlp_backward(ctx, w, dw, step, x, dresidual, kept);
  rmsnorm_backward(dresidual, dw.post_attention_norm, dnorm2, x.residual2, x.norm2_rstd, w.post_attention_norm, R, C,
                   ctx.scratch.column_sums);

  step.gather_output_grad(kept.attn_out);
  {
    const RoundedOnce rounded = step.rounded_for_both(kept.attn_out, ctx.hidden_floats());
    linear_backward_input(ctx.gemm, ctx.scratch.datty, kept.attn_out, w.o_proj, BT, qkv.q_width, C, kLinear);
    step.weight_grad_now(Linear::o);
  }
  // Under selective recomputation the probabilities are rebuilt from the stashed q and k (after RoPE).
  ctx.attention_backward(kept.qkv, qkv.k(kept.qkv), qkv.v(kept.qkv), ctx.scratch.datty, x.qkv, qkv.k(x.qkv),
                         qkv.v(x.qkv), x.atty, x.att, attention_shape(ctx));
  rope_rotate(kept.qkv, *ctx.rope, ctx.B, ctx.T, ctx.local.heads, qkv.width, -1, ctx.positions.ids);
  rope_rotate(qkv.k(kept.qkv), *ctx.rope, ctx.B, ctx.T, ctx.local.kv_heads, qkv.width, -1, ctx.positions.ids);
  {
    const RoundedOnce rounded = step.rounded_for_both(kept.qkv, static_cast<std::size_t>(BT) * qkv.width);
    linear_backward_input(ctx.gemm, step.dln(), kept.qkv, w.qkv_proj, BT, C, qkv.width, kLinear);
    step.reduce_over_tp_during(Linear::qkv);
  }
  rmsnorm_backward(dresidual, dw.input_norm, step.dln_sum(), input, x.norm1_rstd, w.input_norm, R, C,
                   ctx.scratch.column_sums);
}

// A mixture's weight gradients are done in backward (moe_backward).
void LlamaBlock::weight_grad(const LayerContext& ctx, const Weights& dw, const Stash& x, const OutputGrads& kept) {
  for (Linear layer : {Linear::down, Linear::gate_up, Linear::o, Linear::qkv})
    if (!dw.moe.router || (layer != Linear::down && layer != Linear::gate_up))
      linear_weight_grad(layer, ctx, dw, x, kept);
}

void LlamaBlock::linear_weight_grad(Linear layer, const LayerContext& ctx, const Weights& dw, const Stash& x,
                                    const OutputGrads& kept) {
  const int BT = ctx.rows(), C = ctx.C, F = ctx.local.mlp_width;
  const QkvColumns qkv(ctx.local);
  auto grad = [&](float* weight_grad, Operand in, Operand out_grad, int in_features, int out_features) {
    linear_backward_weight(ctx.gemm, weight_grad, nullptr, in, out_grad, BT, in_features, out_features, kLinear);
  };
  switch (layer) {
    case Linear::down:
      return grad(dw.down_proj, x.h, kept.mlp_out, F, C);
    case Linear::gate_up:
      return grad(dw.gate_up_proj, ctx.gather_rows(x.norm2, ctx.scratch.gathered),
                  gate_up_grads(ctx, kept.gate_up).d_gate_up, C, 2 * F);
    case Linear::o:
      return grad(dw.o_proj, x.atty, kept.attn_out, qkv.q_width, C);
    case Linear::qkv:
      return grad(dw.qkv_proj, ctx.gather_rows(x.norm1, ctx.scratch.gathered), kept.qkv, C, qkv.width);
  }
}

}  // namespace trident
