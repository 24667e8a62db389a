// The Comm interface over an MPI communicator (the CPU path, and the default everywhere).
#pragma once

#include <mpi.h>

#include <memory>

#include "comm/comm.hpp"

namespace trident {

// Duplicates `comm` (the Comm owns and frees its duplicate), so its traffic never mixes with
// other users of the same group.
std::unique_ptr<Comm> make_mpi_comm(MPI_Comm comm);

}  // namespace trident
