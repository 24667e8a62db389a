// gemm.hpp on the GPU: cuBLAS on the stream Kokkos' kernels run on, so products and kernels stay
// in order without fences. fp32 operands are multiplied on the tensor cores in TF32 with fp32
// accumulation (the precision contract of the GPU build).
#include <memory>
#include <string>

#include "gpu/cublas_gemm.hpp"
#include "gpu/cuda_check.hpp"
#include "kernels/device.hpp"
#include "kernels/gemm.hpp"

namespace trident {

namespace {

constexpr GemmMath kFp32Math = GemmMath::tf32;

// One cuBLAS handle per process, made on first use and destroyed before Kokkos releases the device.
CublasGemm& cublas() {
  static std::unique_ptr<CublasGemm> instance;
  if (!instance) {
    instance = std::make_unique<CublasGemm>(ExecSpace().cuda_stream());
    Kokkos::push_finalize_hook([] { instance.reset(); });
  }
  return *instance;
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  cublas().gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, kFp32Math);
}

void gemm_strided_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                          long stride_a, const float* b, int ldb, long stride_b, float beta, float* c, int ldc,
                          long stride_c, int batches) {
  cublas().gemm_strided_batched(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                                stride_c, batches, kFp32Math);
}

BlasInfo blas_info() {
  int version = 0, device = 0;
  TRIDENT_GPU_CHECK(cublasGetProperty(MAJOR_VERSION, &version));
  int minor = 0, patch = 0;
  TRIDENT_GPU_CHECK(cublasGetProperty(MINOR_VERSION, &minor));
  TRIDENT_GPU_CHECK(cublasGetProperty(PATCH_LEVEL, &patch));
  TRIDENT_GPU_CHECK(cudaGetDevice(&device));
  cudaDeviceProp properties{};
  TRIDENT_GPU_CHECK(cudaGetDeviceProperties(&properties, device));
  return {"cuBLAS " + std::to_string(version) + "." + std::to_string(minor) + "." + std::to_string(patch) +
              (kFp32Math == GemmMath::tf32 ? ", TF32 tensor cores" : ", fp32"),
          std::string(properties.name) + " (sm_" + std::to_string(properties.major) +
              std::to_string(properties.minor) + ", device " + std::to_string(device) + ")",
          1};
}

}  // namespace trident
