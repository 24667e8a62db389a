// Fully connected layer, y = x · W + b, with W stored in GPT-2's Conv1D layout [in, out] row-major
// or in nn.Linear's [out, in] (Llama, as Hugging Face stores it).
// The backward pass is split in two (input gradient, weight gradient) so that zero-bubble pipeline
// schedules can run them at different times. Weight gradients accumulate across micro-batches.
// Each function is one product; a bias, the GELU after a layer and the bias gradients are the
// product's epilogue (kernels/gemm.hpp).
#pragma once

#include "kernels/gemm.hpp"

namespace trident {

enum class WeightLayout { in_out, out_in };

// y[rows, out] = x[rows, in] · w[in, out] + bias[out]; a null bias adds none (the ranks of a
// row-parallel layer but one, whose partial sums are then added up).
void linear_forward(GemmContext& context, float* y, Operand x, const float* w, const float* bias, int rows, int in,
                    int out, WeightLayout layout = WeightLayout::in_out);

// A layer followed by GELU (GPT-2's c_fc, Conv1D layout): z = x · w + bias is kept in `pre_gelu`
// and y = gelu(z), in fp32 (the product's epilogue) or bf16 (a kernel after it).
void linear_gelu_forward(GemmContext& context, ProductInput y, float* pre_gelu, Operand x, const float* w,
                         const float* bias, int rows, int in, int out);

// dx[rows, in] = dy[rows, out] · wᵀ   (overwrites dx; its rows dx_ld floats apart, 0: in)
void linear_backward_input(GemmContext& context, float* dx, Operand dy, const float* w, int rows, int in, int out,
                           WeightLayout layout = WeightLayout::in_out, int dx_ld = 0);

// The input gradient of a layer whose input was gelu(z) (GPT-2's MLP projection, Conv1D layout),
// taken on through the GELU: dz = (dy · wᵀ) ⊙ gelu'(z), written to dz; and z's bias gradient,
// dz_bias[in] += Σ_rows dz (the layer before's, c_fc's; null: none).
void linear_backward_input_through_gelu(GemmContext& context, float* dz, float* dz_bias, const float* dy,
                                        const float* w, const float* z, int rows, int in, int out);

// dw += xᵀ · dy (in the weight's layout);  dbias[out] += Σ_rows dy (no bias: null; a bias needs dy in fp32)
void linear_backward_weight(GemmContext& context, float* dw, float* dbias, Operand x, Operand dy, int rows,
                            int in, int out, WeightLayout layout = WeightLayout::in_out);

}  // namespace trident
