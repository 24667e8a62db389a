// The Comm interface (comm/comm.hpp) over NCCL, for device buffers: one NCCL communicator per
// grid axis, created from that axis' MPI communicator (rank 0 makes the unique id, MPI broadcasts
// it). The operations run on the communicator's own stream, ordered after the work already queued
// on the compute stream (an event), so that communication overlaps the compute queued after it.
// Blocking calls return once the result is ordered before the compute stream's later work (the
// host does not wait, except for a result it reads itself); the async ones return a request whose
// test() polls the stream's event and whose wait() orders the compute stream after it. A collective
// that never completes is then seen by the step's one read on the host (train/step_figures.hpp),
// which the watchdog watches.
//
// Point to point: NCCL matches a send with the peer's receives in the order they are issued (it
// carries no tag), and runs a communicator's operations in the order they were queued on its one
// stream, so a receive queued ahead holds up every later send: the pipeline's messages use
// nccl_pipeline_comm.hpp's channels instead.
#pragma once

#include <cuda_runtime.h>
#include <mpi.h>

#include <memory>
#include <string>

#include "comm/comm.hpp"

namespace trident {

// Collective over `axis` (every rank of it must call this together). Its waits are watched as
// MpiComm's are, reported as in "the `name` group (world ranks ...)".
std::unique_ptr<Comm> make_nccl_comm(MPI_Comm axis, cudaStream_t compute_stream = nullptr,
                                     const std::string& name = "NCCL");

}  // namespace trident
