// The pipeline group's Comm on the GPU build with parallel.p2p = "nccl": its messages over NCCL,
// device buffers only, matched as NCCL matches them: by posting order, without tags.
//
// NCCL runs one communicator's operations in the order they were queued on its stream, so on one
// communicator a receive posted ahead (as the executor does) would hold up every send queued after
// it. Here every channel, one peer, one direction of travel and one tag, has a two-rank
// communicator and a stream of its own: a channel carries messages one way, so an early receive
// holds up only the later receives of its own FIFO, and sends never wait behind receives. Under
// ordered matching the executor passes a message's direction (activation, gradient) as the tag,
// and schedule/message_order.hpp proves that each channel's k-th send is its k-th receive.
//
// The channels of every pair of neighbouring pipeline ranks (r, r + 1) and of the wrap from the
// last rank to the first (interleaved schedules) are opened at construction: the sender of each
// makes its NCCL id and sends it over MPI, then every communicator is initialised in one NCCL
// group call, so the ranks need no common order. An operation waits for the compute stream's work
// queued so far (an event), so a send reads the finished output and a receive does not overwrite
// a buffer still being read; its request polls an event queued after it, which lets the
// executor's watchdog name a message that never comes. Collectives (the step's loss and gradient
// norm sums) run on one NCCL communicator over the whole group (nccl_comm.hpp).
#pragma once

#include <cuda_runtime.h>
#include <mpi.h>

#include <memory>

#include "comm/comm.hpp"

namespace trident {

// Tags 0 and 1 only (the two directions). Collective over `axis`.
std::unique_ptr<Comm> make_nccl_pipeline_comm(MPI_Comm axis, cudaStream_t compute_stream = nullptr);

}  // namespace trident
