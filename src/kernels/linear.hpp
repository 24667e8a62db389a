// Fully connected layer in GPT-2's Conv1D layout: weight [in, out] row-major, y = x · W + b.
// The backward pass is split in two (input gradient, weight gradient) so that zero-bubble pipeline
// schedules can run them at different times. Weight gradients accumulate across micro-batches.
#pragma once

#include "kernels/gemm.hpp"

namespace trident {

// y[rows, out] = x[rows, in] · w[in, out] + bias[out]; a null bias adds none (the ranks of a
// row-parallel layer but one, whose partial sums are then added up).
void linear_forward(GemmContext& context, float* y, const float* x, const float* w, const float* bias, int rows, int in,
                    int out);

// dx[rows, in] = dy[rows, out] · wᵀ   (overwrites dx)
void linear_backward_input(GemmContext& context, float* dx, const float* dy, const float* w, int rows, int in, int out);

// dw[in, out] += xᵀ · dy;  dbias[out] += Σ_rows dy
void linear_backward_weight(GemmContext& context, float* dw, float* dbias, const float* x, const float* dy, int rows,
                            int in, int out);

}  // namespace trident
