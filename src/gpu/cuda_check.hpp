// CUDA, cuBLAS and NCCL calls return status codes; these turn a failure into an exception that
// names the call, the library's own error string and the source line.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

namespace trident {

struct GpuError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline std::string gpu_error_text(cudaError_t status) { return cudaGetErrorString(status); }
inline std::string gpu_error_text(cublasStatus_t status) { return cublasGetStatusString(status); }
inline std::string gpu_error_text(ncclResult_t status) { return ncclGetErrorString(status); }
inline bool gpu_ok(cudaError_t status) { return status == cudaSuccess; }
inline bool gpu_ok(cublasStatus_t status) { return status == CUBLAS_STATUS_SUCCESS; }
inline bool gpu_ok(ncclResult_t status) { return status == ncclSuccess; }

template <typename Status>
void gpu_check(Status status, const char* call, const char* file, int line) {
  if (!gpu_ok(status))
    throw GpuError(std::string(call) + " failed: " + gpu_error_text(status) + " (" + file + ":" +
                   std::to_string(line) + ")");
}

}  // namespace trident

#define TRIDENT_GPU_CHECK(call) ::trident::gpu_check((call), #call, __FILE__, __LINE__)
