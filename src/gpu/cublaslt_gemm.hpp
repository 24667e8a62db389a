// Matrix products through cuBLASLt with their epilogues fused into them (issue 36): the bias, the
// GELU keeping its pre-activation, the GELU's gradient with the bias gradient of its input, and a
// weight gradient's bias gradient, with the row-major contract of kernels/gemm.hpp's gemm() and
// Epilogue. The algorithm for a shape, its layouts and alignments and its epilogue is chosen once
// (cuBLASLt's heuristic) and cached with its descriptors. Where cuBLASLt cannot fuse an epilogue
// (an auxiliary matrix whose leading dimension is not a multiple of 8, no algorithm for the case),
// gemm() returns false having done nothing, and the caller runs the product another way.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <map>
#include <memory>

namespace trident {

// Row-major, as kernels/gemm.hpp's Epilogue (see there); the bias gradients are added to.
struct FusedEpilogue {
  const float* bias = nullptr;
  float* pre_gelu = nullptr;
  const float* gelu_input = nullptr;
  float* column_sums = nullptr;    // with gelu_input only
  float* b_column_sums = nullptr;  // B not transposed; with nothing else
};

class CublasLtGemm {
 public:
  explicit CublasLtGemm(cudaStream_t stream = nullptr);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // C[m, n] = alpha · op(A) · op(B) + beta · C with `epilogue`, A and B of `inputs` (CUDA_R_32F or
  // CUDA_R_16BF), C fp32, accumulated as `compute` says. Returns false, running nothing, where it
  // cannot fuse.
  bool gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a, int lda, const void* b,
            int ldb, cudaDataType inputs, cublasComputeType_t compute, float beta, float* c, int ldc,
            const FusedEpilogue& epilogue);

 private:
  // What selects an algorithm: m, n, k, the transposes, leading dimensions, input and compute types,
  // the epilogue and the alignments (bytes) of A, B, C, the auxiliary matrix and the bias.
  using Key = std::array<int, 16>;
  struct Plan;
  // The cached plan for `key` (made on first use, its descriptor given `bias` and `aux`, whose
  // alignment the heuristic reads from it); null where cuBLASLt has no algorithm for it.
  Plan* plan_for(const Key& key, const void* bias, const void* aux);
  float* bias_gradient_scratch(int n);

  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  cublasHandle_t blas_ = nullptr;  // adds a bias gradient (cuBLASLt overwrites its own) to the caller's
  void* workspace_ = nullptr;
  float* sums_ = nullptr;  // a bias gradient as cuBLASLt writes it
  int sums_capacity_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;  // a null plan: this case cannot be fused
};

}  // namespace trident
