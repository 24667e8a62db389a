#include "gpu/cublas_gemm.hpp"

#include "gpu/cuda_check.hpp"

namespace trident {

namespace {

cublasComputeType_t compute_type(GemmMath math) {
  return math == GemmMath::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

}  // namespace

CublasGemm::CublasGemm(cudaStream_t stream) {
  TRIDENT_GPU_CHECK(cublasCreate(&handle_));
  TRIDENT_GPU_CHECK(cublasSetStream(handle_, stream));
}

CublasGemm::~CublasGemm() { cublasDestroy(handle_); }

void CublasGemm::gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                      const float* b, int ldb, float beta, float* c, int ldc, GemmMath math) {
  products(trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, CUDA_R_32F, beta, c, ldc, 0, 1, compute_type(math));
}

void CublasGemm::gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const __nv_bfloat16* a, int lda,
                      const __nv_bfloat16* b, int ldb, float beta, float* c, int ldc) {
  products(trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, CUDA_R_16BF, beta, c, ldc, 0, 1, CUBLAS_COMPUTE_32F);
}

void CublasGemm::gemm_strided_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                                      int lda, long stride_a, const float* b, int ldb, long stride_b, float beta,
                                      float* c, int ldc, long stride_c, int batches, GemmMath math) {
  products(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, CUDA_R_32F, beta, c, ldc, stride_c,
           batches, compute_type(math));
}

void CublasGemm::gemm_strided_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                                      const __nv_bfloat16* a, int lda, long stride_a, const __nv_bfloat16* b, int ldb,
                                      long stride_b, float beta, float* c, int ldc, long stride_c, int batches) {
  products(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, CUDA_R_16BF, beta, c, ldc, stride_c,
           batches, CUBLAS_COMPUTE_32F);
}

// cuBLAS is column-major, and a row-major matrix read column-major is its transpose: the row-major
// C = op(A)·op(B) is the column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, so the operands swap places.
void CublasGemm::products(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a, int lda,
                          long stride_a, const void* b, int ldb, long stride_b, cudaDataType input_type, float beta,
                          float* c, int ldc, long stride_c, int batches, cublasComputeType_t compute) {
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batches == 1) {
    TRIDENT_GPU_CHECK(cublasGemmEx(handle_, op_b, op_a, n, m, k, &alpha, b, input_type, ldb, a, input_type, lda, &beta,
                                   c, CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT));
    return;
  }
  TRIDENT_GPU_CHECK(cublasGemmStridedBatchedEx(handle_, op_b, op_a, n, m, k, &alpha, b, input_type, ldb, stride_b, a,
                                               input_type, lda, stride_a, &beta, c, CUDA_R_32F, ldc, stride_c, batches,
                                               compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace trident
