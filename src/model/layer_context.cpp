#include "model/layer_context.hpp"

#include <cstdint>
#include <cstdio>
#include <stdexcept>

namespace trident {

const float* LayerContext::gather_rows(const float* local, float* full) const {
  if (!sequence_parallel) return local;
  tp.all_gather(local, full, local_floats());
  return full;
}

Operand LayerContext::gather_rows(const ProductInput& local, float* full) const {
  if (local.fp32) return gather_rows(local.fp32, full);
  if (!sequence_parallel) return local;
  auto* full_bits = reinterpret_cast<std::uint16_t*>(full);
  tp.all_gather(local.bf16, full_bits, local_floats());
  return Operand::of_bf16(full_bits);
}

CommRequestPtr LayerContext::sum_rows_async(float* partial, float* local) const {
  if (sequence_parallel) return tp.reduce_scatter_sum_async(partial, local, local_floats());
  if (partial != local)
    throw std::logic_error("LayerContext::sum_rows: without sequence parallelism the sum is in place");
  return tp.all_reduce_sum_async(partial, hidden_floats());
}

void LayerContext::attention_forward(float* out, float* saved, const float* q, const float* k, const float* v,
                                     const AttentionShape& shape) const {
  if (ring) return ring->forward(gemm, out, saved, q, k, v, shape);
  trident::attention_forward(gemm, out, saved ? saved : scratch.att, scratch.attention, q, k, v, shape);
}

void LayerContext::attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                      const float* k, const float* v, const float* out, const float* saved,
                                      const AttentionShape& shape) const {
  if (ring) return ring->backward(gemm, dq, dk, dv, dout, q, k, v, out, saved, shape);
  if (!saved) {
    attention_probabilities(gemm, scratch.att, q, k, shape);
    saved = scratch.att;
  }
  trident::attention_backward(gemm, dq, dk, dv, scratch.attention, dout, q, k, v, out, saved, shape);
}

}  // namespace trident
