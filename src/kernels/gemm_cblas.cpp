// gemm.hpp on the CPU: BLAS through its C interface.
#include <cblas.h>

#include "kernels/gemm.hpp"

namespace trident {

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_strided_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                          long stride_a, const float* b, int ldb, long stride_b, float beta, float* c, int ldc,
                          long stride_c, int batches) {
  for (int i = 0; i < batches; ++i)
    gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta, c + i * stride_c, ldc);
}

BlasInfo blas_info() {
#ifdef TRIDENT_HAVE_OPENBLAS
  return {openblas_get_config(), openblas_get_corename(), openblas_get_num_threads()};
#else
  return {"unknown", "unknown", 1};
#endif
}

}  // namespace trident
