#include "optim/grad_norm.hpp"

#include "kernels/row_teams.hpp"

namespace trident {

void sum_of_squares(double* total, const ElementRuns& runs, const float* data) {
  const auto table = runs.device();
  declare_kernel_cost(KernelCost::of_floats(static_cast<double>(runs.elements()), 0.0, 2.0 * runs.elements()));
  sum_over_rows_into("sum_of_squares", static_cast<int>(runs.size()), KOKKOS_LAMBDA(const RowTeam& team, int r) {
    const ElementRun run = table(r);
    const float* x = data + run.local;
    return static_cast<double>(row_sum(team, run.count, [&](int i) { return x[i] * x[i]; }));
  }, total);
}

}  // namespace trident
