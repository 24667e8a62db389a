// GPU tests skip by name, with the reason, on machines without a usable GPU (CI).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

namespace trident {

inline bool gpu_available() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

}  // namespace trident

#define TRIDENT_SKIP_WITHOUT_GPU()                             \
  do {                                                         \
    if (!::trident::gpu_available()) GTEST_SKIP() << "skipped: no GPU"; \
  } while (0)
