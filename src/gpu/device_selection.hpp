// One GPU per rank, chosen from the rank's index among the ranks of its node (the node-local
// rank): ranks 0..G-1 of a node take GPUs 0..G-1. Launchers give every rank all GPUs of its node
// (srun --gpu-bind=none), which keeps CUDA IPC between them possible.
#pragma once

#include <mpi.h>

#include <string>

namespace trident {

struct NodePlacement {
  int local_rank = 0;  // index among the ranks of this node
  int local_ranks = 1;  // ranks on this node
  std::string host;
};

// The device for `placement` among `device_count` visible GPUs: local rank r takes GPU r, or, when
// the ranks share the GPUs (parallel.share_device), GPU r mod device_count. Throws InputError (exit
// 2) when none is visible, or when the node has more ranks than GPUs and they may not share, saying
// how to launch instead.
int choose_device(const NodePlacement& placement, int device_count, bool share = false);

// This rank's placement (MPI_Comm_split_type over `world`): collective over `world`.
NodePlacement node_placement(MPI_Comm world);

// choose_device for this rank and cudaSetDevice; returns the device. Collective over `world`.
int select_device(MPI_Comm world, bool share = false);

}  // namespace trident
