#include "optim/grad_norm.hpp"

#include "kernels/row_teams.hpp"

namespace trident {

void sum_of_squares(double* total, const ElementRuns& runs, const float* data) {
  const auto table = runs.device();
  const Kokkos::View<double, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> result(total);
  Kokkos::parallel_reduce(
      "sum_of_squares", row_team_policy(static_cast<int>(runs.size())),
      KOKKOS_LAMBDA(const RowTeam& team, double& sum) {
        const ElementRun run = table(team.league_rank());
        const float* x = data + run.local;
        const float run_sum = row_sum(team, run.count, [&](int i) { return x[i] * x[i]; });
        if (team.team_rank() == 0) sum += run_sum;
      },
      result);
}

}  // namespace trident
