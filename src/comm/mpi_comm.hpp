// The Comm interface over an MPI communicator (the CPU path, and the default everywhere).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"

namespace trident {

// Duplicates `comm` (the Comm owns and frees its duplicate), so its traffic never mixes with
// other users of the same group. Its blocking calls are watched (common/watchdog.hpp), and reported
// as in "the `name` group (world ranks ...)".
std::unique_ptr<Comm> make_mpi_comm(MPI_Comm comm, const std::string& name = "MPI");

// Each rank's host (MPI's processor name), by rank in `comm`; collective over `comm`.
std::vector<std::string> hosts_of_ranks(MPI_Comm comm);

}  // namespace trident
