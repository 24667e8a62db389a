// Kernels that work row by row (LayerNorm, softmax, cross-entropy) are written once against these
// helpers. On the CPU build a row's worker is one thread and the helpers are plain loops that the
// compiler vectorises. On the GPU build a row's worker splits the row's columns over its threads, so
// that neighbouring threads read neighbouring elements, and combines their partial sums and maxima;
// the worker is one of two, chosen once per run:
//   a warp per row, kWarpRowsPerTeam rows to a team of as many warps (the default; an H200 ran it
//   first on 2026-11-28): sums and maxima by warp shuffles, with no block-wide barrier, and more rows
//   in flight on each multiprocessor;
//   a team of kRowTeamThreads threads per row (TRIDENT_WARP_ROWS=0: the mapping of the GPU runs before).
// A body tells them apart by the team's size (kRowTeamThreads threads or kWarpRowsPerTeam warps).
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
inline constexpr int kWarpRowsPerTeam = 16;
#else
inline constexpr int kRowTeamThreads = 1;  // the helpers' host loops assume a team of one
inline constexpr int kWarpRowsPerTeam = 1;
#endif

// Kokkos' CUDA backend (4.x) gives each team launch its level-1 scratch from a pool and, while the
// pool holds nothing, allocates it anew (with zero bytes) at every launch: a cudaMalloc per launch,
// which a CUDA graph capture refuses. One launch that asks for a few bytes sizes the pool for good;
// the first row-team policy makes it (a no-op on the CPU build).
void size_team_scratch_pool();

// Whether GPU rows are a warp's each (unless TRIDENT_WARP_ROWS=0); read once. Always false on the CPU build.
bool warp_rows();

// Teams for `workers` row workers: every team launch in trident takes its policy from here.
inline Kokkos::TeamPolicy<ExecSpace> row_team_policy(int workers) {
  static const bool pool_sized = (size_team_scratch_pool(), true);
  (void)pool_sized;
  if (warp_rows())
    return Kokkos::TeamPolicy<ExecSpace>((workers + kWarpRowsPerTeam - 1) / kWarpRowsPerTeam, kWarpRowsPerTeam, 32);
  return Kokkos::TeamPolicy<ExecSpace>(workers, kRowTeamThreads);
}

// Whether the team's rows are a warp's each (a team of kWarpRowsPerTeam threads, each a warp).
KOKKOS_INLINE_FUNCTION bool warp_per_row([[maybe_unused]] const RowTeam& team) {
#ifdef __CUDA_ARCH__
  return team.team_size() == kWarpRowsPerTeam;
#else
  return false;
#endif
}

// This row worker's place among the launch's workers, and among its team's.
KOKKOS_INLINE_FUNCTION int row_worker(const RowTeam& team) {
  return warp_per_row(team) ? team.league_rank() * kWarpRowsPerTeam + team.team_rank() : team.league_rank();
}
KOKKOS_INLINE_FUNCTION int worker_in_team(const RowTeam& team) { return warp_per_row(team) ? team.team_rank() : 0; }
KOKKOS_INLINE_FUNCTION int workers_in_team(const RowTeam& team) { return warp_per_row(team) ? kWarpRowsPerTeam : 1; }

// The lanes of a row's worker see each other's writes (a warp's; a team's reductions order them).
KOKKOS_INLINE_FUNCTION void sync_row_worker([[maybe_unused]] const RowTeam& team) {
#ifdef __CUDA_ARCH__
  if (warp_per_row(team)) __syncwarp();
#endif
}

// f() once per row worker (writes of per-row results).
template <class F>
KOKKOS_INLINE_FUNCTION void once_per_row(const RowTeam& team, const F& f) {
  if (warp_per_row(team))
    Kokkos::single(Kokkos::PerThread(team), f);
  else
    Kokkos::single(Kokkos::PerTeam(team), f);
}

// body(team, r) for every row r < rows.
template <class Body>
void for_each_row(const char* label, int rows, const Body& body) {
  Kokkos::parallel_for(label, row_team_policy(rows), KOKKOS_LAMBDA(const RowTeam& team) {
    const int r = row_worker(team);
    if (r < rows) body(team, r);
  });
}

// Σ_r body(team, r) into `sum`, once per row: body returns its row's contribution, the same on every
// thread of its worker.
template <class Body>
KOKKOS_INLINE_FUNCTION void add_row_value(const RowTeam& team, int rows, const Body& body, double& sum) {
  const int r = row_worker(team);
  if (r >= rows) return;
  const double row_value = body(team, r);
  once_per_row(team, [&] { sum += row_value; });
}

// Σ_r body(team, r), read on the host.
template <class Body>
double sum_over_rows(const char* label, int rows, const Body& body) {
  double total = 0.0;
  Kokkos::parallel_reduce(
      label, row_team_policy(rows),
      KOKKOS_LAMBDA(const RowTeam& team, double& sum) { add_row_value(team, rows, body, sum); }, total);
  note_host_wait(label);  // the total is read on the host
  return total;
}

// *total (one device double) = Σ_r body(team, r), as sum_over_rows but left on the device: queued,
// the host does not wait for it.
template <class Body>
void sum_over_rows_into(const char* label, int rows, const Body& body, double* total) {
  Kokkos::parallel_reduce(
      label, row_team_policy(rows),
      KOKKOS_LAMBDA(const RowTeam& team, double& sum) { add_row_value(team, rows, body, sum); },
      Kokkos::View<double, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(total));
}

// Σ_{i<n} f(i), on every thread of the row's worker.
template <class F>
KOKKOS_INLINE_FUNCTION float row_sum(const RowTeam& team, int n, const F& f) {
  float sum = 0.0f;
#ifdef __CUDA_ARCH__
  if (warp_per_row(team))
    Kokkos::parallel_reduce(Kokkos::ThreadVectorRange(team, n), [&](int i, float& partial) { partial += f(i); }, sum);
  else
    Kokkos::parallel_reduce(Kokkos::TeamThreadRange(team, n), [&](int i, float& partial) { partial += f(i); }, sum);
  sync_row_worker(team);
#else
  (void)team;
  TRIDENT_SIMD_REDUCTION(+ : sum)
  for (int i = 0; i < n; ++i) sum += f(i);
#endif
  return sum;
}

// max_{i<n} f(i) (−FLT_MAX when n = 0), on every thread of the row's worker.
template <class F>
KOKKOS_INLINE_FUNCTION float row_max(const RowTeam& team, int n, const F& f) {
  float largest = -FLT_MAX;
#ifdef __CUDA_ARCH__
  const auto take_larger = [&](int i, float& partial) {
    const float value = f(i);
    partial = value > partial ? value : partial;
  };
  if (warp_per_row(team))
    Kokkos::parallel_reduce(Kokkos::ThreadVectorRange(team, n), take_larger, Kokkos::Max<float>(largest));
  else
    Kokkos::parallel_reduce(Kokkos::TeamThreadRange(team, n), take_larger, Kokkos::Max<float>(largest));
  sync_row_worker(team);
#else
  (void)team;
  TRIDENT_SIMD_REDUCTION(max : largest)
  for (int i = 0; i < n; ++i) largest = f(i) > largest ? f(i) : largest;
#endif
  return largest;
}

// f(i) for i in [first, end), split across the row's worker. An element written here may be read
// by another of its threads only after a reduction (row_sum, row_max).
template <class F>
KOKKOS_INLINE_FUNCTION void row_for(const RowTeam& team, int first, int end, const F& f) {
#ifdef __CUDA_ARCH__
  if (warp_per_row(team))
    Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, first, end), f);
  else
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, first, end), f);
#else
  (void)team;
  for (int i = first; i < end; ++i) f(i);
#endif
}

// f(i) for i in [0, n), split across every thread of the team (whatever rows its workers hold).
template <class F>
KOKKOS_INLINE_FUNCTION void team_for(const RowTeam& team, int n, const F& f) {
#ifdef __CUDA_ARCH__
  Kokkos::parallel_for(Kokkos::TeamVectorRange(team, n), f);
#else
  (void)team;
  for (int i = 0; i < n; ++i) f(i);
#endif
}

}  // namespace trident
