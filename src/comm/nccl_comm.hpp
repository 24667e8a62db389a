// The Comm interface (comm/comm.hpp) over NCCL, for device buffers: one NCCL communicator per
// grid axis, created from that axis' MPI communicator (rank 0 makes the unique id, MPI broadcasts
// it). The operations run on the communicator's own stream, ordered after the work already queued
// on the compute stream (an event), so that communication overlaps the compute queued after it.
// Blocking calls return once the result is in place; the async ones return a request whose
// test() polls and wait() blocks on the stream's event.
//
// Point to point: NCCL matches a send with the peer's receives in the order they are issued (it
// carries no tag), so both ranks must issue each pair's messages in the same order, and a receive
// must not be queued ahead of a send that its sender waits for. The pipeline executor posts
// receives ahead and therefore stays on the MPI communicator until its NCCL mode issues each
// action's messages as one group.
#pragma once

#include <cuda_runtime.h>
#include <mpi.h>

#include <memory>

#include "comm/comm.hpp"

namespace trident {

// Collective over `axis` (every rank of it must call this together).
std::unique_ptr<Comm> make_nccl_comm(MPI_Comm axis, cudaStream_t compute_stream = nullptr);

}  // namespace trident
