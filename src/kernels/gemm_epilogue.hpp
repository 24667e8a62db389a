// A product's epilogue (kernels/gemm.hpp's Epilogue) as Kokkos kernels around the library's call,
// for a library that does not fuse it: the bias filled into C before the product (which then
// accumulates onto it), the GELU or its gradient and the column sums after it. Every build runs
// these unless its library fuses the epilogue.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/column_sums.hpp"
#include "kernels/gemm.hpp"

namespace trident {

// Device scratch for the column sums, grown to the widest product seen (so, once warmed up, no
// allocation inside a step).
class EpilogueScratch {
 public:
  ColumnSumScratch for_columns(int columns);

 private:
  std::unique_ptr<ColumnSumBuffers> buffers_;
  int columns_ = 0;
};

// Before the product: C's rows filled with the bias. Returns the β the product then uses (1 where
// the bias was filled, else `beta`). Throws std::logic_error for an epilogue that the product's
// arguments cannot carry (a bias or GELU gradient with β ≠ 0, B's column sums of a transposed B or
// of a B stored in bf16).
float prepare_epilogue(const Epilogue& epilogue, float beta, bool trans_b, Operand b, float* c, int m, int n, int ldc);

// After the product: the GELU or its gradient on C, C's column sums, and B's (B k × n, rows ldb apart).
void finish_epilogue(const Epilogue& epilogue, float* c, int m, int n, int ldc, const float* b, int ldb, int k,
                     EpilogueScratch& scratch);

// y[0, n) = gelu(z[0, n)) as bf16 bits: a GELU output stored for products in bf16 (ProductInput),
// after a product that wrote z with its bias epilogue (kernels/linear.hpp). Any build, any library.
void gelu_into_bf16(std::uint16_t* y, const float* z, long n);

}  // namespace trident
