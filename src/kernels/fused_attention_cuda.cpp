// fused_attention.hpp on the GPU build: our flash-attention kernels, on the stream Kokkos' kernels
// run on, under train.precision = "bf16" (their products read bf16 inputs, as every product then
// does) and for the shapes they take. The default there since a GPU check showed them equal to the
// tiled kernel (bench/README "GPU runs"); TRIDENT_FLASH_ATTENTION=0 falls back to the tiled kernel.
#include "common/env_switch.hpp"
#include "gpu/flash_attention.hpp"
#include "kernels/attention_heads.hpp"
#include "kernels/device.hpp"
#include "kernels/fused_attention.hpp"
#include "kernels/profile.hpp"

namespace trident::attention_detail {

namespace {

bool flash_attention_on() {
  static const bool on = !environment_says("TRIDENT_FLASH_ATTENTION", "0");
  return on;
}

FlashAttentionShape flash_shape(const AttentionShape& s) {
  return {s.B, s.T, s.heads, s.kv_heads, s.head_dim, s.q_ld, s.kv_ld, s.out_ld};
}

bool takes(const GemmContext& context, const AttentionShape& s) {
  // The flash kernels know the causal mask of a whole sequence only: packed documents and chunk
  // pairs run the tiled kernel.
  return !s.documents && s.query_offset == 0 && s.key_offset == 0 && !s.accumulate_grads && flash_attention_on() && context.precision() == MatmulPrecision::bf16 &&
         flash_attention_supports(flash_shape(s));
}

// A launch's cost (kernels/profile.hpp): tensors of the query heads' shape [B, T, heads, hd] and of
// the key/value heads' shape read and written once each, per-row statistics [B, heads, T], and
// `products` causal products of B·heads·T²·hd operations each (the visible half of 2·T²·hd).
KernelCost flash_cost(const AttentionShape& s, double query_tensors, double kv_tensors, double statistics,
                      double products) {
  const double rows = static_cast<double>(s.B) * s.T;
  return KernelCost::of_floats(0.0, rows * s.head_dim * (query_tensors * s.heads + kv_tensors * s.kv_heads) +
                                        statistics * rows * s.heads,
                               products * rows * s.heads * s.T * s.head_dim);
}

}  // namespace

bool fused_forward(GemmContext& context, float* out, float* log_sum_exp, const float* q, const float* k,
                   const float* v, const AttentionShape& s) {
  if (!takes(context, s)) return false;
  declare_kernel_cost(flash_cost(s, 2, 2, 1, 2));  // q, out; k, v; lse; S and P·V
  const ForeignKernel kernel("flash_attention_forward");
  flash_attention_forward(out, log_sum_exp, q, k, v, flash_shape(s), ExecSpace().cuda_stream());
  return true;
}

bool fused_backward(GemmContext& context, float* dq, float* dk, float* dv, float* scratch, const float* dout,
                    const float* q, const float* k, const float* v, const float* out, const float* log_sum_exp,
                    const AttentionShape& s) {
  if (!takes(context, s)) return false;
  float* dots = row_statistics(scratch, s);
  {
    declare_kernel_cost(flash_cost(s, 4, 2, 2, 3));  // q, dO, out, dq; k, v; lse, D; S, dP, dQ
    const ForeignKernel kernel("flash_attention_query_grads");
    flash_attention_query_grads(dq, dots, dout, q, k, v, out, log_sum_exp, flash_shape(s), ExecSpace().cuda_stream());
  }
  declare_kernel_cost(flash_cost(s, 2, 4, 2, 4));  // q, dO; k, v, dk, dv; lse, D; S, dP, dV, dK
  const ForeignKernel kernel("flash_attention_key_grads");
  flash_attention_key_grads(dk, dv, dout, q, k, v, dots, log_sum_exp, flash_shape(s), ExecSpace().cuda_stream());
  return true;
}

}  // namespace trident::attention_detail
