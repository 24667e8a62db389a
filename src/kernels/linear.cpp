#include "kernels/linear.hpp"

#include <stdexcept>

#include "kernels/gemm.hpp"
#include "kernels/gemm_epilogue.hpp"

namespace trident {

void linear_forward(GemmContext& context, float* y, Operand x, const float* w, const float* bias, int rows, int in,
                    int out, WeightLayout layout) {
  const bool out_in = layout == WeightLayout::out_in;
  Epilogue epilogue;
  epilogue.bias = bias;
  gemm(context, false, out_in, rows, out, in, 1.0f, x, in, w, out_in ? in : out, 0.0f, y, out, epilogue);
}

void linear_gelu_forward(GemmContext& context, ProductInput y, float* pre_gelu, Operand x, const float* w,
                         const float* bias, int rows, int in, int out) {
  Epilogue epilogue;
  epilogue.bias = bias;
  if (y.bf16) {
    gemm(context, false, false, rows, out, in, 1.0f, x, in, w, out, 0.0f, pre_gelu, out, epilogue);
    gelu_into_bf16(y.bf16, pre_gelu, static_cast<long>(rows) * out);
    return;
  }
  epilogue.pre_gelu = pre_gelu;
  gemm(context, false, false, rows, out, in, 1.0f, x, in, w, out, 0.0f, y.fp32, out, epilogue);
}

void linear_backward_input(GemmContext& context, float* dx, Operand dy, const float* w, int rows, int in, int out,
                           WeightLayout layout, int dx_ld) {
  const bool out_in = layout == WeightLayout::out_in;
  gemm(context, false, !out_in, rows, in, out, 1.0f, dy, out, w, out_in ? in : out, 0.0f, dx, dx_ld > 0 ? dx_ld : in);
}

void linear_backward_input_through_gelu(GemmContext& context, float* dz, float* dz_bias, const float* dy,
                                        const float* w, const float* z, int rows, int in, int out) {
  Epilogue epilogue;
  epilogue.gelu_input = z;
  epilogue.column_sums = dz_bias;
  gemm(context, false, true, rows, in, out, 1.0f, dy, out, w, out, 0.0f, dz, in, epilogue);
}

void linear_backward_weight(GemmContext& context, float* dw, float* dbias, Operand x, Operand dy, int rows,
                            int in, int out, WeightLayout layout) {
  if (dbias && !dy.fp32) throw std::logic_error("linear_backward_weight: a bias gradient of a bf16 output gradient");
  if (layout == WeightLayout::out_in) {  // dw[out, in] += dyᵀ · x: dy is A there (Llama: no biases)
    if (dbias) throw std::logic_error("linear_backward_weight: a bias with an [out, in] weight");
    gemm(context, true, false, out, in, rows, 1.0f, dy, out, x, in, 1.0f, dw, in);
    return;
  }
  Epilogue epilogue;
  epilogue.b_column_sums = dbias;
  gemm(context, true, false, in, out, rows, 1.0f, x, in, dy, out, 1.0f, dw, out, epilogue);
}

}  // namespace trident
