// This process's place in MPI_COMM_WORLD, for the tests run under mpirun.
#pragma once

#include <mpi.h>

namespace trident::testing_mpi {

inline int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

}  // namespace trident::testing_mpi
