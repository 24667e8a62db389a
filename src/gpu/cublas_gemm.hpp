// Matrix products on the GPU through cuBLAS, with the same row-major contract as kernels/gemm.hpp:
// C[m, n] = alpha · op(A) · op(B) + beta · C, op(A) m × k, op(B) k × n, leading dimensions in
// elements. Inputs are fp32 (with fp32 or TF32 tensor-core arithmetic) or bf16 (the bf16 copies of
// fp32 master weights and activations); C and the accumulation are always fp32.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace trident {

enum class GemmMath {
  fp32,  // IEEE fp32 throughout (the reference)
  tf32,  // fp32 inputs rounded to TF32 on the tensor cores, fp32 accumulation
};

class CublasGemm {
 public:
  // The products run on `stream` (nullptr: the legacy default stream).
  explicit CublasGemm(cudaStream_t stream = nullptr);
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;

  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
            int ldb, float beta, float* c, int ldc, GemmMath math = GemmMath::tf32);
  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const __nv_bfloat16* a, int lda,
            const __nv_bfloat16* b, int ldb, float beta, float* c, int ldc);
  // `batches` products; product i reads a + i·stride_a, b + i·stride_b and writes c + i·stride_c.
  void gemm_strided_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                            long stride_a, const float* b, int ldb, long stride_b, float beta, float* c, int ldc,
                            long stride_c, int batches, GemmMath math = GemmMath::tf32);
  void gemm_strided_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const __nv_bfloat16* a,
                            int lda, long stride_a, const __nv_bfloat16* b, int ldb, long stride_b, float beta,
                            float* c, int ldc, long stride_c, int batches);

 private:
  // Every public call: one cublasGemmEx, or a cublasGemmStridedBatchedEx for several products.
  void products(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a, int lda, long stride_a,
                const void* b, int ldb, long stride_b, cudaDataType input_type, float beta, float* c, int ldc,
                long stride_c, int batches, cublasComputeType_t compute);

  cublasHandle_t handle_ = nullptr;
};

}  // namespace trident
