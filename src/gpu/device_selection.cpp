#include "gpu/device_selection.hpp"

#include <cuda_runtime.h>

#include <cstdlib>
#include <vector>

#include "common/error.hpp"
#include "gpu/cuda_check.hpp"

namespace trident {

int choose_device(const NodePlacement& placement, int device_count, bool share) {
  const std::string where = placement.host.empty() ? "this node" : "node " + placement.host;
  if (device_count <= 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    throw InputError("no CUDA device is visible on " + where + " (CUDA_VISIBLE_DEVICES=" +
                     (visible ? visible : "<unset>") +
                     "): request GPUs from the scheduler (e.g. sbatch --gpus-per-node=G) or run the cpu build");
  }
  if (share) return placement.local_rank % device_count;
  if (placement.local_ranks > device_count)
    throw InputError(std::to_string(placement.local_ranks) + " ranks run on " + where + " but it has " +
                     std::to_string(device_count) + " GPU(s): launch one rank per GPU (srun --ntasks-per-node=" +
                     std::to_string(device_count) + ", or mpirun --map-by ppr:" + std::to_string(device_count) +
                     ":node), or set parallel.share_device = true to let ranks share them (a test mode: "
                     "communication then goes through host memory)");
  return placement.local_rank;
}

NodePlacement node_placement(MPI_Comm world) {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  NodePlacement placement;
  MPI_Comm_rank(node, &placement.local_rank);
  MPI_Comm_size(node, &placement.local_ranks);
  MPI_Comm_free(&node);
  std::vector<char> name(MPI_MAX_PROCESSOR_NAME);
  int length = 0;
  MPI_Get_processor_name(name.data(), &length);
  placement.host.assign(name.data(), static_cast<std::size_t>(length));
  return placement;
}

int select_device(MPI_Comm world, bool share) {
  const NodePlacement placement = node_placement(world);
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess) device_count = 0;  // no driver = no GPU here
  const int device = choose_device(placement, device_count, share);
  TRIDENT_GPU_CHECK(cudaSetDevice(device));
  return device;
}

}  // namespace trident
