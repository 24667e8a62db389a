// device_graph.hpp on the CPU build: kernels run as they are launched; there is no graph to capture.
#include <stdexcept>

#include "kernels/device_graph.hpp"

namespace trident {

struct DeviceGraph::Captured {};

bool DeviceGraph::available() { return false; }

DeviceGraph::DeviceGraph(const std::function<void()>&) {
  throw std::logic_error("DeviceGraph: the CPU build has no device graphs (train.cuda_graph needs the GPU build)");
}

DeviceGraph::~DeviceGraph() = default;

void DeviceGraph::launch() {}

}  // namespace trident
