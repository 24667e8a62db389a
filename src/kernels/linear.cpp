#include "kernels/linear.hpp"

#include "kernels/column_blocks.hpp"
#include "kernels/device.hpp"
#include "kernels/gemm.hpp"

namespace trident {

namespace {

void fill_rows_with_bias(float* y, const float* bias, int rows, int out) {
  Kokkos::parallel_for("fill_rows_with_bias", Kokkos::RangePolicy<ExecSpace>(0, rows), KOKKOS_LAMBDA(int r) {
    float* y_row = y + static_cast<long>(r) * out;
    for (int o = 0; o < out; ++o) y_row[o] = bias[o];
  });
}

void accumulate_column_sums(float* sums, const float* a, int rows, int columns) {
  for_each_column_block(columns, "bias_grad", KOKKOS_LAMBDA(int first, int end) {
    for (int r = 0; r < rows; ++r) {
      const float* a_row = a + static_cast<long>(r) * columns;
      for (int c = first; c < end; ++c) sums[c] += a_row[c];
    }
  });
}

}  // namespace

void linear_forward(float* y, const float* x, const float* w, const float* bias, int rows, int in, int out) {
  // BLAS clears C before accumulating into it when beta = 0; filling C with the bias instead and
  // accumulating with beta = 1 makes the bias free.
  if (bias) fill_rows_with_bias(y, bias, rows, out);
  gemm(false, false, rows, out, in, 1.0f, x, in, w, out, bias ? 1.0f : 0.0f, y, out);
}

void linear_backward_input(float* dx, const float* dy, const float* w, int rows, int in, int out) {
  gemm(false, true, rows, in, out, 1.0f, dy, out, w, out, 0.0f, dx, in);
}

void linear_backward_weight(float* dw, float* dbias, const float* x, const float* dy, int rows, int in, int out) {
  gemm(true, false, in, out, rows, 1.0f, x, in, dy, out, 1.0f, dw, out);
  accumulate_column_sums(dbias, dy, rows, out);
}

}  // namespace trident
