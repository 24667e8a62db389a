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
#include <type_traits>
#include <utility>

#include "kernels/device.hpp"

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

}  // namespace trident
