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

// "the dp group (world ranks 0, 2 on node7)", or "(world ranks 0 on node7, 2 on node8)" across
// hosts: a group as the watchdog names it; collective over `comm`.
std::string describe_group(MPI_Comm comm, const std::string& name);

}  // namespace trident
