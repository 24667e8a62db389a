#include "kernels/device_clock.hpp"

#include <algorithm>

#include "kernels/device.hpp"
#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>

#include "gpu/cuda_check.hpp"
#endif

namespace trident {

#ifdef KOKKOS_ENABLE_CUDA

// Events recorded since the last settle, and a pool of created ones reused step after step.
struct DeviceClock::Events {
  std::vector<cudaEvent_t> pool;
  std::vector<double> provisional;  // one per event in use, in order

  ~Events() {
    for (cudaEvent_t event : pool) cudaEventDestroy(event);
  }
  cudaEvent_t next() {
    if (provisional.size() == pool.size()) {
      cudaEvent_t event = nullptr;
      TRIDENT_GPU_CHECK(cudaEventCreate(&event));
      pool.push_back(event);
    }
    return pool[provisional.size()];
  }
};

DeviceClock::DeviceClock(std::function<double()> host_seconds)
    : host_seconds_(std::move(host_seconds)), events_(new Events) {}

DeviceClock::~DeviceClock() { delete events_; }

double DeviceClock::mark() {
  TRIDENT_GPU_CHECK(cudaEventRecord(events_->next(), ExecSpace().cuda_stream()));
  const double provisional = host_seconds_();
  events_->provisional.push_back(provisional);
  return provisional;
}

void DeviceClock::settle() {
  settled_.clear();
  const std::vector<double>& provisional = events_->provisional;
  if (provisional.empty()) return;
  const std::size_t marks = provisional.size();
  TRIDENT_GPU_CHECK(cudaEventSynchronize(events_->pool[marks - 1]));
  for (std::size_t i = 0; i < marks; ++i) {
    float milliseconds = 0.0f;
    TRIDENT_GPU_CHECK(cudaEventElapsedTime(&milliseconds, events_->pool[0], events_->pool[i]));
    settled_.emplace_back(provisional[i], provisional[0] + 1e-3 * milliseconds);
  }
  std::sort(settled_.begin(), settled_.end());
  events_->provisional.clear();
}

#else

DeviceClock::DeviceClock(std::function<double()> host_seconds) : host_seconds_(std::move(host_seconds)) {}

DeviceClock::~DeviceClock() = default;

double DeviceClock::mark() { return host_seconds_(); }

void DeviceClock::settle() {}

#endif

double DeviceClock::settled(double time) const {
  const auto found = std::lower_bound(settled_.begin(), settled_.end(), std::pair{time, -1e300});
  return found != settled_.end() && found->first == time ? found->second : time;
}

}  // namespace trident
