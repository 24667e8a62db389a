// Sums over the rows of a row-major matrix into per-column totals: bias and LayerNorm parameter
// gradients, and the embedding's scatter-add into the rows of its tokens. Written once as
//   add_rows_into<K>(label, rows, columns, destinations, terms):
//   for every row r, column c and k < K: destinations(r)[k][c] += terms(r, c)[k],
// where destinations(r) names K output rows (the same for every r for a bias; a token's row for
// the embedding; null to skip). (Two functors rather than one returning a per-row closure: nvcc
// 13's cicc exhausts memory on a lambda returned from a device lambda.)
//
// CPU build: the columns are split into blocks of kColumnBlock and each block walks all rows in
// order, so no two iterations write the same element (race-free, deterministic) and each row's
// slice of a block is contiguous. GPU build: that would leave a handful of threads; there one
// thread per (column, chunk of kRowChunk rows) accumulates in registers, neighbouring threads on
// neighbouring columns, and adds its sums with atomics when its destination changes and at the end.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/device.hpp"
#include "kernels/row_teams.hpp"

namespace trident {

inline constexpr int kColumnBlock = 256;
inline constexpr int kRowChunk = 64;

template <std::size_t K>
using Destinations = Kokkos::Array<float*, K>;
template <std::size_t K>
using Terms = Kokkos::Array<float, K>;

// The CPU build's inner loops: destinations[k][first, end) += terms(r, ·)[k], one loop per k. k is a
// compile-time constant, and the outputs never overlap the inputs: both let the loops vectorise.
template <class TermsOfElement, std::size_t... ks>
KOKKOS_INLINE_FUNCTION void add_row_slice(const Destinations<sizeof...(ks)>& into, const TermsOfElement& terms, int r,
                                          int first, int end, std::index_sequence<ks...>) {
  auto add = [&](auto index) {
    constexpr std::size_t k = decltype(index)::value;
    float* __restrict__ out = into[k];
    if (out)
      for (int c = first; c < end; ++c) out[c] += terms(r, c)[k];
  };
  (add(std::integral_constant<std::size_t, ks>()), ...);
}

template <std::size_t K, class DestinationsOfRow, class TermsOfElement>
void add_rows_into(const char* label, int rows, int columns, const DestinationsOfRow& destinations,
                   const TermsOfElement& terms) {
#ifdef KOKKOS_ENABLE_CUDA
  const int chunks = (rows + kRowChunk - 1) / kRowChunk;
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<ExecSpace>(0, static_cast<long>(chunks) * columns), KOKKOS_LAMBDA(long i) {
        const int c = static_cast<int>(i % columns), first = static_cast<int>(i / columns) * kRowChunk;
        const int end = first + kRowChunk < rows ? first + kRowChunk : rows;
        Destinations<K> current = destinations(first);
        Terms<K> sums{};
        for (int r = first; r < end; ++r) {
          const Destinations<K> into = destinations(r);
          const Terms<K> term = terms(r, c);
          for (std::size_t k = 0; k < K; ++k) {
            if (into[k] != current[k]) {
              if (current[k]) Kokkos::atomic_add(current[k] + c, sums[k]);
              current[k] = into[k];
              sums[k] = 0.0f;
            }
            sums[k] += term[k];
          }
        }
        for (std::size_t k = 0; k < K; ++k)
          if (current[k]) Kokkos::atomic_add(current[k] + c, sums[k]);
      });
#else
  const int blocks = (columns + kColumnBlock - 1) / kColumnBlock;
  Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace>(0, blocks), KOKKOS_LAMBDA(int block) {
    const int first = block * kColumnBlock;
    const int end = first + kColumnBlock < columns ? first + kColumnBlock : columns;
    for (int r = 0; r < rows; ++r) {
      add_row_slice(destinations(r), terms, r, first, end, std::make_index_sequence<K>());
    }
  });
#endif
}

// A row kernel that also sums per-column terms over its rows, in one launch (a norm's backward: the
// input gradient row by row, the weight and bias gradients summed over the rows):
//   rows_with_column_sums<K>(label, rows, columns, into, scratch, body):
//   body(team, r, add) does row r's own work and calls add(c, terms) once for every column c of the
//   row, from within row_for(team, 0, columns, ...), so that a column is always added by the same
//   thread of the row's worker; then into[k][c] += Σ_r terms(r, c)[k] (a null into[k] is skipped).
// Each of kColumnSumTeams teams takes a contiguous block of rows; each of its row workers (one, or
// kWarpRowsPerTeam warps: kernels/row_teams.hpp) sums its rows' terms in its own slice of the
// scratch, and the team adds its workers' slices into its first, in order. The last team to finish
// (an atomic count) adds every team's sums into `into`, in team order, so the result is the same
// whatever the timing. The CPU build has one team of one worker.
#ifdef KOKKOS_ENABLE_CUDA
// Two per multiprocessor of an H100 or H200: with kWarpRowsPerTeam warps each, 4,224 warps in flight.
// The H200 measured one team per multiprocessor of 8 warps at 0.3-0.5 TB/s (2026-11-28): a warp's
// rows one after another, each load waited for, too few warps to hide it.
inline constexpr int kColumnSumTeams = 264;
#else
inline constexpr int kColumnSumTeams = 1;
#endif

struct ColumnSumScratch {
  float* partials = nullptr;  // kColumnSumTeams × kWarpRowsPerTeam × K × columns
  int* finished = nullptr;    // teams done; 0 between launches
};

// Device memory for rows_with_column_sums launches of up to `terms` terms over `columns` columns,
// one launch at a time.
class ColumnSumBuffers {
 public:
  ColumnSumBuffers(int terms, int columns)
      : partials_(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("column_sum_partials")),
                  static_cast<std::size_t>(kColumnSumTeams) * kWarpRowsPerTeam * terms * columns),
        finished_("column_sum_finished", 1) {}
  ColumnSumScratch scratch() const { return {partials_.data(), finished_.data()}; }
  static std::size_t floats(int terms, int columns) {
    return static_cast<std::size_t>(kColumnSumTeams) * kWarpRowsPerTeam * terms * columns + 1;
  }

 private:
  FloatBuffer partials_;
  IntBuffer finished_;
};

// What a row's body adds into its team's column sums.
template <std::size_t K>
struct ColumnAdder {
  float* sums;  // the team's K × columns
  int columns;
  KOKKOS_INLINE_FUNCTION void operator()(int c, const Terms<K>& terms) const {
    for (std::size_t k = 0; k < K; ++k) sums[k * columns + c] += terms[k];
  }
};

// Reads a sum another team wrote: on the GPU from L2 (ld.global.cg), past this multiprocessor's L1
// cache, which does not see other multiprocessors' writes. Not a volatile read, so that a thread
// has many in flight (the last team reads every team's sums).
KOKKOS_INLINE_FUNCTION float other_team_sum(const float* at) {
#ifdef __CUDA_ARCH__
  return __ldcg(at);
#else
  return *at;
#endif
}

template <std::size_t K, class Body>
void rows_with_column_sums(const char* label, int rows, int columns, const Destinations<K>& into,
                           const ColumnSumScratch& scratch, const Body& body) {
  const int teams = kColumnSumTeams;
  const long slice = static_cast<long>(K) * columns;
  Kokkos::parallel_for(label, row_team_policy(teams * (warp_rows() ? kWarpRowsPerTeam : 1)),
                       KOKKOS_LAMBDA(const RowTeam& team) {
    const int t = team.league_rank(), block = (rows + teams - 1) / teams;
    const int first = t * block, end = first + block < rows ? first + block : rows;
    const int workers = workers_in_team(team), worker = worker_in_team(team);
    float* team_sums = scratch.partials + t * workers * slice;
    team_for(team, static_cast<int>(workers * slice), [&](int i) { team_sums[i] = 0.0f; });
    team.team_barrier();
    const ColumnAdder<K> add{team_sums + worker * slice, columns};
    for (int r = first + worker; r < end; r += workers) body(team, r, add);
    team.team_barrier();
    if (workers > 1) {
      team_for(team, static_cast<int>(slice), [&](int i) {
        for (int w = 1; w < workers; ++w) team_sums[i] += team_sums[w * slice + i];
      });
      team.team_barrier();
    }
    int last = 0;
    Kokkos::single(
        Kokkos::PerTeam(team),
        [&](int& is_last) {
          Kokkos::memory_fence();  // this team's sums are visible before it counts itself done
          is_last = Kokkos::atomic_fetch_add(scratch.finished, 1) == teams - 1;
        },
        last);
    if (!last) return;
    Kokkos::memory_fence();
    team_for(team, columns, [&](int c) {
      for (std::size_t k = 0; k < K; ++k) {
        float sum = 0.0f;
#ifdef __CUDA_ARCH__
#pragma unroll 8
#endif
        for (int s = 0; s < teams; ++s) sum += other_team_sum(scratch.partials + s * workers * slice + k * columns + c);
        if (into[k]) into[k][c] += sum;
      }
    });
    Kokkos::single(Kokkos::PerTeam(team), [&] { *scratch.finished = 0; });
  });
}

}  // namespace trident
