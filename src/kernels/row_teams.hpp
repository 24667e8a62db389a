// Kernels that work row by row (LayerNorm, softmax, cross-entropy) are written once against these
// helpers: one team per row. On the CPU build a team is one thread and the helpers are plain loops
// that the compiler vectorises; on the GPU build the team's threads split the row's columns, so
// that neighbouring threads read neighbouring elements, and combine their partial sums and maxima.
#pragma once

#include <cfloat>

#include "kernels/device.hpp"
#include "kernels/profile.hpp"

// The row sums' lanes on the CPU: modules built as kernels (kernels/CMakeLists.txt,
// trident_vectorised_kernels) honour `#pragma omp simd reduction`; elsewhere the loop stays plain
// and no compiler warns about a pragma it was not asked to read.
#ifdef TRIDENT_OPENMP_SIMD
#define TRIDENT_SIMD_REDUCTION(clause) _Pragma(TRIDENT_SIMD_PRAGMA(clause))
#define TRIDENT_SIMD_PRAGMA(clause) TRIDENT_SIMD_STRING(omp simd reduction(clause))
#define TRIDENT_SIMD_STRING(text) #text
#else
#define TRIDENT_SIMD_REDUCTION(clause)
#endif

namespace trident {

using RowTeam = Kokkos::TeamPolicy<ExecSpace>::member_type;

#ifdef KOKKOS_ENABLE_CUDA
inline constexpr int kRowTeamThreads = 256;
#else
inline constexpr int kRowTeamThreads = 1;  // the helpers' host loops assume a team of one
#endif

// Kokkos' CUDA backend (4.x) gives each team launch its level-1 scratch from a pool and, while the
// pool holds nothing, allocates it anew (with zero bytes) at every launch: a cudaMalloc per launch,
// which a CUDA graph capture refuses. One launch that asks for a few bytes sizes the pool for good;
// the first row-team policy makes it (a no-op on the CPU build).
void size_team_scratch_pool();

// `teams` teams of kRowTeamThreads: every team launch in trident takes its policy from here.
inline Kokkos::TeamPolicy<ExecSpace> row_team_policy(int teams) {
  static const bool pool_sized = (size_team_scratch_pool(), true);
  (void)pool_sized;
  return Kokkos::TeamPolicy<ExecSpace>(teams, kRowTeamThreads);
}

// body(team, r) for every row r < rows.
template <class Body>
void for_each_row(const char* label, int rows, const Body& body) {
  Kokkos::parallel_for(label, row_team_policy(rows),
                       KOKKOS_LAMBDA(const RowTeam& team) { body(team, team.league_rank()); });
}

// Σ_r body(team, r): body returns its row's contribution, the same on every thread of the team.
template <class Body>
double sum_over_rows(const char* label, int rows, const Body& body) {
  double total = 0.0;
  Kokkos::parallel_reduce(
      label, row_team_policy(rows),
      KOKKOS_LAMBDA(const RowTeam& team, double& sum) {
        const double row_value = body(team, team.league_rank());
        if (team.team_rank() == 0) sum += row_value;
      },
      total);
  note_host_wait(label);  // the total is read on the host
  return total;
}

// *total (one device double) = Σ_r body(team, r), as sum_over_rows but left on the device: queued,
// the host does not wait for it.
template <class Body>
void sum_over_rows_into(const char* label, int rows, const Body& body, double* total) {
  Kokkos::parallel_reduce(
      label, row_team_policy(rows),
      KOKKOS_LAMBDA(const RowTeam& team, double& sum) {
        const double row_value = body(team, team.league_rank());
        if (team.team_rank() == 0) sum += row_value;
      },
      Kokkos::View<double, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(total));
}

// Σ_{i<n} f(i), on every thread of the team.
template <class F>
KOKKOS_INLINE_FUNCTION float row_sum(const RowTeam& team, int n, const F& f) {
  float sum = 0.0f;
#ifdef __CUDA_ARCH__
  Kokkos::parallel_reduce(Kokkos::TeamThreadRange(team, n), [&](int i, float& partial) { partial += f(i); }, sum);
#else
  (void)team;
  TRIDENT_SIMD_REDUCTION(+ : sum)
  for (int i = 0; i < n; ++i) sum += f(i);
#endif
  return sum;
}

// max_{i<n} f(i) (−FLT_MAX when n = 0), on every thread of the team.
template <class F>
KOKKOS_INLINE_FUNCTION float row_max(const RowTeam& team, int n, const F& f) {
  float largest = -FLT_MAX;
#ifdef __CUDA_ARCH__
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, n),
      [&](int i, float& partial) {
        const float value = f(i);
        partial = value > partial ? value : partial;
      },
      Kokkos::Max<float>(largest));
#else
  (void)team;
  TRIDENT_SIMD_REDUCTION(max : largest)
  for (int i = 0; i < n; ++i) largest = f(i) > largest ? f(i) : largest;
#endif
  return largest;
}

// f(i) for i in [first, end), split across the team. An element written here may be read by
// another thread of the team only after a reduction (row_sum, row_max) or team.team_barrier().
template <class F>
KOKKOS_INLINE_FUNCTION void row_for(const RowTeam& team, int first, int end, const F& f) {
#ifdef __CUDA_ARCH__
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, first, end), f);
#else
  (void)team;
  for (int i = first; i < end; ++i) f(i);
#endif
}

// f() once per row (writes of per-row results).
template <class F>
KOKKOS_INLINE_FUNCTION void once_per_row(const RowTeam& team, const F& f) {
  Kokkos::single(Kokkos::PerTeam(team), f);
}

}  // namespace trident
