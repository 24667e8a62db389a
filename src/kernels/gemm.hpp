// The one place that chooses the matrix-multiply library: BLAS (cblas) on the CPU build.
// Every matrix product of the model goes through gemm(); row-major throughout, as the tensors are.
#pragma once

#include <string>

namespace trident {

// C[m, n] = alpha · op(A) · op(B) + beta · C, all row-major; op(A) is m × k, op(B) is k × n,
// op(X) = Xᵀ when trans_x. Leading dimensions are row strides in elements.
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);

struct BlasInfo {
  std::string library;  // e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
  std::string core;     // kernel family in use, e.g. "Haswell" or "SkylakeX"
  int threads = 1;
};
BlasInfo blas_info();

// Best GFLOP/s reached by a few square sgemm (n = 1024 … 2048) in about a second: the reference
// that MFU is reported against.
double measure_gemm_peak_gflops();

}  // namespace trident
