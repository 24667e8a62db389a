// A Comm whose buffers travel through host memory: each operation copies its device input into a
// host buffer, runs the wrapped Comm on host buffers, and copies the result to the device when it
// completes (wait() or a test() that finds it done). It lets an MPI without GPU support carry the
// GPU build's pipeline messages; on the CPU build the copies are host to host. A host buffer per
// operation in flight, allocated when the operation starts.
#pragma once

#include <memory>

#include "comm/comm.hpp"

namespace trident {

std::unique_ptr<Comm> make_host_staged_comm(std::unique_ptr<Comm> host_comm);

}  // namespace trident
