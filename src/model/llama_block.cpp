#include "model/llama_block.hpp"

#include "kernels/attention.hpp"
#include "kernels/copy.hpp"
#include "kernels/linear.hpp"
#include "kernels/residual.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/swiglu.hpp"

namespace trident {

namespace {

constexpr WeightLayout kLinear = WeightLayout::out_in;

AttentionShape attention_shape(const LayerContext& ctx) {
  const TpShape& local = ctx.local;
  const long q_width = static_cast<long>(local.heads) * local.head_dim;
  const long kv_width = static_cast<long>(local.kv_heads) * local.head_dim;
  return {ctx.B, ctx.T, local.heads, local.kv_heads, local.head_dim, q_width, kv_width, q_width, ctx.attention};
}

}  // namespace

void LlamaBlock::add_parameters(ParamStore& params, const ModelConfig& cfg, int layer) {
  const std::int64_t C = cfg.d_model, hd = cfg.head_dim(), F = cfg.mlp_hidden();
  const std::int64_t q = cfg.heads * hd, kv = cfg.key_value_heads() * hd;
  constexpr int by_rows = 0, by_columns = 1;  // nn.Linear weights are [out, in]
  const std::string p = prefix(layer);
  params.add(p + "input_layernorm.weight", {C});
  params.add(p + "self_attn.q_proj.weight", {q, C}, by_rows);
  params.add(p + "self_attn.k_proj.weight", {kv, C}, by_rows);
  params.add(p + "self_attn.v_proj.weight", {kv, C}, by_rows);
  params.add(p + "self_attn.o_proj.weight", {C, q}, by_columns);
  params.add(p + "post_attention_layernorm.weight", {C});
  params.add(p + "mlp.gate_proj.weight", {F, C}, by_rows);
  params.add(p + "mlp.up_proj.weight", {F, C}, by_rows);
  params.add(p + "mlp.down_proj.weight", {C, F}, by_columns);
}

LlamaBlock::Weights LlamaBlock::tensors(const FloatBuffer& buffer, const ParamStore& params, int layer) {
  const std::string p = prefix(layer);
  auto at = [&](const std::string& name) { return params.find(p + name).in(buffer); };
  return {at("input_layernorm.weight"),  at("self_attn.q_proj.weight"), at("self_attn.k_proj.weight"),
          at("self_attn.v_proj.weight"), at("self_attn.o_proj.weight"), at("post_attention_layernorm.weight"),
          at("mlp.gate_proj.weight"),    at("mlp.up_proj.weight"),      at("mlp.down_proj.weight")};
}

void LlamaBlock::forward(const LayerContext& ctx, const Weights& w, const Stash& x, const float* input) {
  const int BT = ctx.rows(), R = ctx.local_rows(), C = ctx.C, F = ctx.local.mlp_width;
  const int q_width = ctx.local.heads * ctx.local.head_dim, kv_width = ctx.local.kv_heads * ctx.local.head_dim;
  // Row-parallel projection back to C: this rank's input features times its columns of w, summed over TP.
  auto row_parallel = [&](float* y, const float* in, const float* weight, int in_features) {
    float* partial = ctx.partial_rows(y, ctx.scratch.gathered);
    linear_forward(ctx.gemm, partial, in, weight, nullptr, BT, in_features, C, kLinear);
    ctx.sum_rows(partial, y);
  };
  rmsnorm_forward(x.norm1, x.norm1_rstd, input, w.input_norm, ctx.norm_eps, R, C);
  const float* norm1 = ctx.gather_rows(x.norm1, ctx.scratch.gathered);
  linear_forward(ctx.gemm, x.q, norm1, w.q_proj, nullptr, BT, C, q_width, kLinear);
  linear_forward(ctx.gemm, x.k, norm1, w.k_proj, nullptr, BT, C, kv_width, kLinear);
  linear_forward(ctx.gemm, x.v, norm1, w.v_proj, nullptr, BT, C, kv_width, kLinear);
  rope_rotate(x.q, *ctx.rope, ctx.B, ctx.local.heads, q_width, +1);
  rope_rotate(x.k, *ctx.rope, ctx.B, ctx.local.kv_heads, kv_width, +1);
  attention_forward(ctx.gemm, x.atty, x.att ? x.att : ctx.scratch.att, ctx.scratch.attention, x.q, x.k, x.v,
                    attention_shape(ctx));
  row_parallel(x.residual2, x.atty, w.o_proj, q_width);
  rmsnorm_forward(x.norm2, x.norm2_rstd, NormInput::residual(x.residual2, x.residual2, input), w.post_attention_norm,
                  ctx.norm_eps, R, C);
  const float* norm2 = ctx.gather_rows(x.norm2, ctx.scratch.gathered);
  linear_forward(ctx.gemm, x.gate, norm2, w.gate_proj, nullptr, BT, C, F, kLinear);
  linear_forward(ctx.gemm, x.up, norm2, w.up_proj, nullptr, BT, C, F, kLinear);
  swiglu_forward(x.h, x.gate, x.up, static_cast<long>(BT) * F);
  row_parallel(x.residual3, x.h, w.down_proj, F);
  residual_forward(x.residual3, x.residual3, x.residual2, ctx.local_floats());
}

void LlamaBlock::backward(const LayerContext& ctx, const Weights& w, const Weights& dw, const Stash& x,
                          const float* input, float* dresidual, const OutputGrads& kept, WeightGrads when) {
  const int BT = ctx.rows(), R = ctx.local_rows(), C = ctx.C, F = ctx.local.mlp_width;
  const int q_width = ctx.local.heads * ctx.local.head_dim, kv_width = ctx.local.kv_heads * ctx.local.head_dim;
  const bool now = when == WeightGrads::now;
  float* dln = ctx.scratch.dln;
  float* dln_sum = ctx.partial_rows(dln, ctx.scratch.dln_local);
  // The row-parallel projections' output gradient: the stream's, gathered from the TP group under
  // sequence parallelism; kept where their weight gradients will read it.
  auto gather_output_grad = [&](float* kept_grad) {
    const float* grad = ctx.gather_rows(dresidual, ctx.scratch.dgathered);
    if (kept_grad != grad) copy_floats(kept_grad, grad, ctx.hidden_floats());
  };
  auto weight_grads_now = [&](std::initializer_list<Linear> layers) {
    if (now) linear_weight_grads(layers, ctx, dw, x, kept);
  };
  // The gradient entering the column-parallel projections from their shared input is this rank's
  // share only: it is summed over TP while their weight gradients run.
  auto reduce_over_tp_during = [&](std::initializer_list<Linear> layers) {
    const CommRequestPtr reduce = ctx.sum_rows_async(dln, dln_sum);
    weight_grads_now(layers);
    reduce->wait();
  };
  gather_output_grad(kept.mlp_out);
  linear_backward_input(ctx.gemm, kept.gate, kept.mlp_out, w.down_proj, BT, F, C, kLinear);  // dh, then dgate
  weight_grads_now({Linear::down});
  swiglu_backward(kept.gate, kept.up, kept.gate, x.gate, x.up, static_cast<long>(BT) * F);
  linear_backward_input(ctx.gemm, dln, kept.gate, w.gate_proj, BT, C, F, kLinear);
  linear_backward_input_add(ctx.gemm, dln, kept.up, w.up_proj, BT, C, F, kLinear);
  reduce_over_tp_during({Linear::gate, Linear::up});
  rmsnorm_backward(dresidual, dw.post_attention_norm, dln_sum, x.residual2, x.norm2_rstd, w.post_attention_norm, R, C,
                   ctx.scratch.column_sums);

  gather_output_grad(kept.attn_out);
  linear_backward_input(ctx.gemm, ctx.scratch.datty, kept.attn_out, w.o_proj, BT, q_width, C, kLinear);
  weight_grads_now({Linear::o});
  const float* saved = x.att;
  if (!saved) {  // selective recomputation: the probabilities rebuilt from the stashed q and k (after RoPE)
    attention_probabilities(ctx.gemm, ctx.scratch.att, x.q, x.k, attention_shape(ctx));
    saved = ctx.scratch.att;
  }
  attention_backward(ctx.gemm, kept.q, kept.k, kept.v, ctx.scratch.attention, ctx.scratch.datty, x.q, x.k, x.v, x.atty,
                     saved, attention_shape(ctx));
  rope_rotate(kept.q, *ctx.rope, ctx.B, ctx.local.heads, q_width, -1);
  rope_rotate(kept.k, *ctx.rope, ctx.B, ctx.local.kv_heads, kv_width, -1);
  linear_backward_input(ctx.gemm, dln, kept.q, w.q_proj, BT, C, q_width, kLinear);
  linear_backward_input_add(ctx.gemm, dln, kept.k, w.k_proj, BT, C, kv_width, kLinear);
  linear_backward_input_add(ctx.gemm, dln, kept.v, w.v_proj, BT, C, kv_width, kLinear);
  reduce_over_tp_during({Linear::q, Linear::k, Linear::v});
  rmsnorm_backward(dresidual, dw.input_norm, dln_sum, input, x.norm1_rstd, w.input_norm, R, C, ctx.scratch.column_sums);
}

void LlamaBlock::weight_grad(const LayerContext& ctx, const Weights& dw, const Stash& x, const OutputGrads& kept) {
  linear_weight_grads({Linear::down, Linear::gate, Linear::up, Linear::o, Linear::q, Linear::k, Linear::v}, ctx, dw, x,
                      kept);
}

void LlamaBlock::linear_weight_grads(std::initializer_list<Linear> layers, const LayerContext& ctx, const Weights& dw,
                                     const Stash& x, const OutputGrads& kept) {
  const int BT = ctx.rows(), C = ctx.C, F = ctx.local.mlp_width;
  const int q_width = ctx.local.heads * ctx.local.head_dim, kv_width = ctx.local.kv_heads * ctx.local.head_dim;
  auto grad = [&](float* weight_grad, const float* in, const float* out_grad, int in_features, int out_features) {
    linear_backward_weight(ctx.gemm, weight_grad, nullptr, in, out_grad, BT, in_features, out_features, kLinear);
  };
  // The column-parallel projections read their norm's output on every row: gathered once per norm.
  const float *gathered_from = nullptr, *gathered = nullptr;
  auto all_rows = [&](const float* local) {
    if (local != gathered_from) gathered = ctx.gather_rows(gathered_from = local, ctx.scratch.gathered);
    return gathered;
  };
  for (Linear layer : layers) {
    switch (layer) {
      case Linear::down:
        grad(dw.down_proj, x.h, kept.mlp_out, F, C);
        break;
      case Linear::gate:
        grad(dw.gate_proj, all_rows(x.norm2), kept.gate, C, F);
        break;
      case Linear::up:
        grad(dw.up_proj, all_rows(x.norm2), kept.up, C, F);
        break;
      case Linear::o:
        grad(dw.o_proj, x.atty, kept.attn_out, q_width, C);
        break;
      case Linear::q:
        grad(dw.q_proj, all_rows(x.norm1), kept.q, C, q_width);
        break;
      case Linear::k:
        grad(dw.k_proj, all_rows(x.norm1), kept.k, C, kv_width);
        break;
      case Linear::v:
        grad(dw.v_proj, all_rows(x.norm1), kept.v, C, kv_width);
        break;
    }
  }
}

}  // namespace trident
