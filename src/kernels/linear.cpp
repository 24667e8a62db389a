#include "kernels/linear.hpp"

#include "kernels/column_sums.hpp"
#include "kernels/gemm.hpp"
#include "kernels/row_teams.hpp"

namespace trident {

namespace {

void fill_rows_with_bias(float* y, const float* bias, int rows, int out) {
  for_each_row("fill_rows_with_bias", rows, KOKKOS_LAMBDA(const RowTeam& team, int r) {
    float* y_row = y + static_cast<long>(r) * out;
    row_for(team, 0, out, [&](int o) { y_row[o] = bias[o]; });
  });
}

void accumulate_column_sums(float* sums, const float* a, int rows, int columns) {
  add_rows_into<1>(
      "bias_grad", rows, columns, KOKKOS_LAMBDA(int) { return Destinations<1>{sums}; },
      KOKKOS_LAMBDA(int r, int c) { return Terms<1>{a[static_cast<long>(r) * columns + c]}; });
}

}  // namespace

void linear_forward(GemmContext& context, float* y, const float* x, const float* w, const float* bias, int rows, int in,
                    int out, WeightLayout layout) {
  // BLAS clears C before accumulating into it when beta = 0; filling C with the bias instead and
  // accumulating with beta = 1 makes the bias free.
  if (bias) fill_rows_with_bias(y, bias, rows, out);
  const bool out_in = layout == WeightLayout::out_in;
  gemm(context, false, out_in, rows, out, in, 1.0f, x, in, w, out_in ? in : out, bias ? 1.0f : 0.0f, y, out);
}

void linear_backward_input(GemmContext& context, float* dx, const float* dy, const float* w, int rows, int in, int out,
                           WeightLayout layout, int dx_ld) {
  const bool out_in = layout == WeightLayout::out_in;
  gemm(context, false, !out_in, rows, in, out, 1.0f, dy, out, w, out_in ? in : out, 0.0f, dx, dx_ld > 0 ? dx_ld : in);
}

void linear_backward_weight(GemmContext& context, float* dw, float* dbias, const float* x, const float* dy, int rows,
                            int in, int out, WeightLayout layout) {
  if (layout == WeightLayout::out_in)
    gemm(context, true, false, out, in, rows, 1.0f, dy, out, x, in, 1.0f, dw, in);  // dw[out, in] += dyᵀ · x
  else
    gemm(context, true, false, in, out, rows, 1.0f, x, in, dy, out, 1.0f, dw, out);
  if (dbias) accumulate_column_sums(dbias, dy, rows, out);
}

}  // namespace trident
