#include "kernels/row_teams.hpp"

#include "common/env_switch.hpp"

namespace trident {

void size_team_scratch_pool() {
#ifdef KOKKOS_ENABLE_CUDA
  Kokkos::parallel_for("size_team_scratch_pool",
                       Kokkos::TeamPolicy<ExecSpace>(1, 1).set_scratch_size(1, Kokkos::PerTeam(64)),
                       KOKKOS_LAMBDA(const RowTeam&){});
#endif
}

bool warp_rows() {
#ifdef KOKKOS_ENABLE_CUDA
  static const bool on = !environment_says("TRIDENT_WARP_ROWS", "0");
  return on;
#else
  return false;
#endif
}

}  // namespace trident
