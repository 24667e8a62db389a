// Device work recorded once and replayed (train.cuda_graph): the GPU build captures the kernels,
// products and copies that `work` queues on the compute stream into a CUDA graph and launches the
// graph thereafter, one launch instead of hundreds. A replay runs the captured kernels with the
// captured arguments and none of `work`'s host code, so `work` must queue the same device work
// every time: no host wait, no allocation, nothing decided on the host from data that changes.
// The CPU build runs kernels as they are launched and has nothing to capture.
#pragma once

#include <functional>
#include <memory>

namespace trident {

class DeviceGraph {
 public:
  // Whether this build can capture (the GPU build).
  static bool available();

  // Captures what `work` queues on the compute stream, then launches it once (capturing runs
  // nothing on the device). Throws GpuError where the capture fails (a host wait inside `work`),
  // std::logic_error on the CPU build.
  explicit DeviceGraph(const std::function<void()>& work);
  ~DeviceGraph();
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;

  // Queues the captured work again on the compute stream; the host does not wait.
  void launch();

 private:
  struct Captured;
  std::unique_ptr<Captured> captured_;
};

}  // namespace trident
