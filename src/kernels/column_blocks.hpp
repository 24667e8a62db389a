// Sums over the rows of a row-major matrix (bias and LayerNorm parameter gradients, embedding
// scatter-adds) parallelised over blocks of adjacent columns: no two iterations write the same
// column, so it is race-free on any backend, and on the CPU each row's slice of a block is
// contiguous, so the row loop streams through memory instead of striding a column at a time.
#pragma once

#include <Kokkos_Core.hpp>

#include "kernels/device.hpp"

namespace trident {

inline constexpr int kColumnBlock = 256;

// Calls body(first_column, end_column) once per block of at most kColumnBlock columns.
template <class Body>
void for_each_column_block(int columns, const char* label, const Body& body) {
  const int blocks = (columns + kColumnBlock - 1) / kColumnBlock;
  Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace>(0, blocks), KOKKOS_LAMBDA(int block) {
    const int first = block * kColumnBlock;
    const int end = first + kColumnBlock < columns ? first + kColumnBlock : columns;
    body(first, end);
  });
}

}  // namespace trident
