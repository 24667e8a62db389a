#include "kernels/layernorm.hpp"

#include "kernels/column_sums.hpp"
#include "kernels/fused_rows.hpp"
#include "kernels/math.hpp"
#include "kernels/matmul_precision.hpp"
#include "kernels/row_teams.hpp"

namespace trident {

void layernorm_forward(ProductInput out, float* mean, float* rstd, const NormInput& x, const float* weight,
                       const float* bias, int rows, int C) {
  declare_kernel_cost(norm_forward_cost(x, rows, C, 2, 8, out.bf16 != nullptr));
  for_each_row("layernorm_forward", rows, KOKKOS_LAMBDA(const RowTeam& team, int r) {
    const long offset = static_cast<long>(r) * C;
    const float m = x.first_pass(team, offset, C, [](float value) { return value; }) / C;
    const float* x_row = x.row(offset);
    const float squares = row_sum(team, C, [&](int c) { return (x_row[c] - m) * (x_row[c] - m); });
    const float s = 1.0f / math::sqrt(squares / C + kLayerNormEps);
    row_for(team, 0, C, [&](int c) { store(out, offset + c, (x_row[c] - m) * s * weight[c] + bias[c]); });
    once_per_row(team, [&] {
      mean[r] = m;
      rstd[r] = s;
    });
  });
}

void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* mean, const float* rstd, const float* weight, int rows, int C,
                        const ColumnSumScratch& scratch) {
  declare_kernel_cost(norm_backward_cost(rows, C, 2, 14));
  if (fused_rows::norm_backward(dx, dweight, dbias, dout, x, mean, rstd, weight, rows, C, scratch)) return;
  rows_with_column_sums<2>(
      "layernorm_backward", rows, C, Destinations<2>{dweight, dbias}, scratch,
      KOKKOS_LAMBDA(const RowTeam& team, int r, const ColumnAdder<2>& add) {
        const float* x_row = x + static_cast<long>(r) * C;
        const float* dout_row = dout + static_cast<long>(r) * C;
        const float m = mean[r], s = rstd[r];
        // dnorm = weight · dout; the two row means below are the projections LayerNorm removes.
        const float dnorm_mean = row_sum(team, C, [&](int c) { return weight[c] * dout_row[c]; }) / C;
        const float dnorm_norm_mean =
            row_sum(team, C, [&](int c) { return weight[c] * dout_row[c] * (x_row[c] - m) * s; }) / C;
        float* dx_row = dx + static_cast<long>(r) * C;
        row_for(team, 0, C, [&](int c) {
          const float norm = (x_row[c] - m) * s;
          dx_row[c] += (weight[c] * dout_row[c] - dnorm_mean - norm * dnorm_norm_mean) * s;
          add(c, Terms<2>{norm * dout_row[c], dout_row[c]});
        });
      });
}

}  // namespace trident
