// device_graph.hpp on the GPU build: stream capture on Kokkos' compute stream, where every kernel,
// cuBLAS(Lt) product and flash-attention launch of a step is queued. Capture is thread-local: an
// allocation or a wait on another thread (MPI's progress, a checkpoint's writer) does not break it,
// while one inside `work` does, loudly.
#include <cuda_runtime.h>

#include "gpu/cuda_check.hpp"
#include "kernels/device.hpp"
#include "kernels/device_graph.hpp"

namespace trident {

struct DeviceGraph::Captured {
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t executable = nullptr;
};

bool DeviceGraph::available() { return true; }

DeviceGraph::DeviceGraph(const std::function<void()>& work) : captured_(std::make_unique<Captured>()) {
  Captured& c = *captured_;
  c.stream = ExecSpace().cuda_stream();
  TRIDENT_GPU_CHECK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
  try {
    work();
  } catch (...) {
    cudaGraph_t abandoned = nullptr;
    cudaStreamEndCapture(c.stream, &abandoned);  // leave the stream usable for the error's report
    if (abandoned) cudaGraphDestroy(abandoned);
    throw;
  }
  TRIDENT_GPU_CHECK(cudaStreamEndCapture(c.stream, &c.graph));
  TRIDENT_GPU_CHECK(cudaGraphInstantiate(&c.executable, c.graph, 0));
  launch();
}

DeviceGraph::~DeviceGraph() {
  if (captured_->executable) cudaGraphExecDestroy(captured_->executable);
  if (captured_->graph) cudaGraphDestroy(captured_->graph);
}

void DeviceGraph::launch() { TRIDENT_GPU_CHECK(cudaGraphLaunch(captured_->executable, captured_->stream)); }

}  // namespace trident
