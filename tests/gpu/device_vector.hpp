// Test helper: a device copy of a host vector, freed at scope exit.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "gpu/cuda_check.hpp"

namespace trident {

template <typename T>
struct DeviceVector {
  explicit DeviceVector(const std::vector<T>& host) : size(host.size()) {
    TRIDENT_GPU_CHECK(cudaMalloc(&data, size * sizeof(T)));
    TRIDENT_GPU_CHECK(cudaMemcpy(data, host.data(), size * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceVector() { cudaFree(data); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  DeviceVector(DeviceVector&& other) noexcept : data(other.data), size(other.size) { other.data = nullptr; }
  std::vector<T> to_host() const {
    std::vector<T> host(size);
    TRIDENT_GPU_CHECK(cudaMemcpy(host.data(), data, size * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  T* data = nullptr;
  std::size_t size;
};

}  // namespace trident
