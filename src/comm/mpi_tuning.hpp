// Open MPI settings that trident chooses for itself when the user has not. They go into the
// environment before MPI_Init, where Open MPI reads its OMPI_MCA_* parameters whatever the
// launcher (mpirun, srun), so a value the user exported, or gave to mpirun as --mca, still wins.
// Other MPI libraries ignore these variables.
//
// coll_libnbc_iallreduce_algorithm = 1 (ring: reduce-scatter, then all-gather, around the group).
// Open MPI's non-blocking all-reduce (libnbc) otherwise takes a binomial tree, a reduce to one
// rank and a broadcast back, for every in-place call and every group of fewer than 4 ranks: that
// is every gradient bucket and every tensor-parallel all-reduce trident starts. The tree sends the
// whole buffer log2(p) times each way and sums it on one rank; the ring moves 2(p-1)/p of it per
// rank and shares the sums. bench/mpi_allreduce times the algorithms against each other in one
// run (README "Open MPI settings" has the figures).
#pragma once

#include <string>
#include <vector>

namespace trident {

struct MpiSetting {
  std::string variable;  // OMPI_MCA_...
  std::string value;
  bool from_user;        // already in the environment: left as it was
  std::string meaning;   // what the value selects, for the start-up banner
};

// Call before MPI_Init. Sets each of trident's defaults that the environment does not already
// hold and returns every setting with where its value came from.
std::vector<MpiSetting> apply_mpi_tuning_defaults();

// "Open MPI v4.1.4 | non-blocking all-reduce: ring (trident's default
// OMPI_MCA_coll_libnbc_iallreduce_algorithm=1)", for rank 0's banner; call after MPI_Init.
// Another MPI library gets its name alone.
std::string describe_mpi(const std::vector<MpiSetting>& settings);

}  // namespace trident
