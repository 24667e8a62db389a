// fused_attention.hpp on the CPU build: there is no fused kernel; the tiled kernel is the CPU's.
#include "kernels/fused_attention.hpp"

namespace trident::attention_detail {

bool fused_forward(GemmContext&, float*, float*, const float*, const float*, const float*, const AttentionShape&) {
  return false;
}

bool fused_backward(GemmContext&, float*, float*, float*, float*, const float*, const float*, const float*,
                    const float*, const float*, const float*, const AttentionShape&) {
  return false;
}

}  // namespace trident::attention_detail
