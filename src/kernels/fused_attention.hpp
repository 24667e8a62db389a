// Attention's fused GPU kernel (gpu/flash_attention.hpp) behind attention.hpp's entry points, as
// gemm.hpp's library is behind gemm(): the GPU build links fused_attention_cuda.cpp, the CPU build
// fused_attention_none.cpp (never fused). Where these return false the tiled kernel runs.
#pragma once

#include "kernels/attention.hpp"

namespace trident::attention_detail {

// Forward on the fused kernel when it takes the call; returns whether it ran. `log_sum_exp` as the
// tiled kernel saves it.
bool fused_forward(GemmContext& context, float* out, float* log_sum_exp, const float* q, const float* k,
                   const float* v, const AttentionShape& shape);

// Backward on the fused kernel when it takes the call (`scratch`: attention_scratch_floats);
// returns whether it ran.
bool fused_backward(GemmContext& context, float* dq, float* dk, float* dv, float* scratch, const float* dout,
                    const float* q, const float* k, const float* v, const float* out, const float* log_sum_exp,
                    const AttentionShape& shape);

}  // namespace trident::attention_detail
