#include "kernels/rmsnorm.hpp"

#include "kernels/column_sums.hpp"
#include "kernels/fused_rows.hpp"
#include "kernels/math.hpp"
#include "kernels/matmul_precision.hpp"
#include "kernels/row_teams.hpp"

namespace trident {

void rmsnorm_forward(ProductInput out, float* rstd, const NormInput& x, const float* weight, float eps, int rows,
                     int C) {
  declare_kernel_cost(norm_forward_cost(x, rows, C, 1, 4, out.bf16 != nullptr));
  for_each_row(
      "rmsnorm_forward", rows, KOKKOS_LAMBDA(const RowTeam& team, int r) {
        const long offset = static_cast<long>(r) * C;
        const float squares = x.first_pass(team, offset, C, [](float value) { return value * value; });
        const float* x_row = x.row(offset);
        const float s = 1.0f / math::sqrt(squares / C + eps);
        row_for(team, 0, C, [&](int c) { store(out, offset + c, x_row[c] * s * weight[c]); });
        once_per_row(team, [&] { rstd[r] = s; });
      });
}

void rmsnorm_backward(float* dx, float* dweight, const float* dout, const float* x, const float* rstd,
                      const float* weight, int rows, int C, const ColumnSumScratch& scratch) {
  declare_kernel_cost(norm_backward_cost(rows, C, 1, 9));
  if (fused_rows::norm_backward(dx, dweight, nullptr, dout, x, nullptr, rstd, weight, rows, C, scratch)) return;
  rows_with_column_sums<1>(
      "rmsnorm_backward", rows, C, Destinations<1>{dweight}, scratch,
      KOKKOS_LAMBDA(const RowTeam& team, int r, const ColumnAdder<1>& add) {
        const float* x_row = x + static_cast<long>(r) * C;
        const float* dout_row = dout + static_cast<long>(r) * C;
        const float s = rstd[r];
        // The one projection RMSNorm removes: along the normalised row itself.
        const float dnorm_norm_mean =
            row_sum(team, C, [&](int c) { return weight[c] * dout_row[c] * x_row[c] * s; }) / C;
        float* dx_row = dx + static_cast<long>(r) * C;
        row_for(team, 0, C, [&](int c) {
          const float norm = x_row[c] * s;
          dx_row[c] += (weight[c] * dout_row[c] - norm * dnorm_norm_mean) * s;
          add(c, Terms<1>{norm * dout_row[c]});
        });
      });
}

}  // namespace trident
