#include "kernels/tied_head.hpp"

#include "kernels/gemm.hpp"

namespace trident {

void tied_head_forward(GemmContext& context, float* logits, Operand x, const float* wte, int rows, int C, int V,
                       int ld) {
  gemm(context, false, true, rows, V, C, 1.0f, x, C, wte, C, 0.0f, logits, ld);
}

void tied_head_backward_input(GemmContext& context, float* dx, const float* dlogits, const float* wte, float scale,
                              int rows, int C, int V, int ld) {
  gemm(context, false, false, rows, C, V, scale, dlogits, ld, wte, C, 0.0f, dx, C);
}

void tied_head_backward_weight(GemmContext& context, float* dwte, const float* dlogits, Operand x, float scale,
                               int rows, int C, int V, int ld) {
  gemm(context, true, false, V, C, rows, scale, dlogits, ld, x, C, 1.0f, dwte, C);
}

}  // namespace trident
