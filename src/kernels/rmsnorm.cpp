#include "kernels/rmsnorm.hpp"

#include "kernels/column_sums.hpp"
#include "kernels/math.hpp"
#include "kernels/row_teams.hpp"

namespace trident {

void rmsnorm_forward(float* out, float* rstd, const float* x, const float* weight, float eps, int rows, int C) {
  for_each_row(
      "rmsnorm_forward", rows, KOKKOS_LAMBDA(const RowTeam& team, int r) {
        const float* x_row = x + static_cast<long>(r) * C;
        const float squares = row_sum(team, C, [&](int c) { return x_row[c] * x_row[c]; });
        const float s = 1.0f / math::sqrt(squares / C + eps);
        float* out_row = out + static_cast<long>(r) * C;
        row_for(team, 0, C, [&](int c) { out_row[c] = x_row[c] * s * weight[c]; });
        once_per_row(team, [&] { rstd[r] = s; });
      });
}

void rmsnorm_backward(float* dx, float* dweight, const float* dout, const float* x, const float* rstd,
                      const float* weight, int rows, int C) {
  for_each_row(
      "rmsnorm_backward_input", rows, KOKKOS_LAMBDA(const RowTeam& team, int r) {
        const float* x_row = x + static_cast<long>(r) * C;
        const float* dout_row = dout + static_cast<long>(r) * C;
        const float s = rstd[r];
        // The one projection RMSNorm removes: along the normalised row itself.
        const float dnorm_norm_mean =
            row_sum(team, C, [&](int c) { return weight[c] * dout_row[c] * x_row[c] * s; }) / C;
        float* dx_row = dx + static_cast<long>(r) * C;
        row_for(team, 0, C,
                [&](int c) { dx_row[c] += (weight[c] * dout_row[c] - x_row[c] * s * dnorm_norm_mean) * s; });
      });
  add_rows_into<1>(
      "rmsnorm_backward_weight", rows, C, KOKKOS_LAMBDA(int) { return Destinations<1>{dweight}; },
      KOKKOS_LAMBDA(int r, int c) {
        const long at = static_cast<long>(r) * C + c;
        return Terms<1>{x[at] * rstd[r] * dout[at]};
      });
}

}  // namespace trident
