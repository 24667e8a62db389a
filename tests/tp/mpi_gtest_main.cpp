// GoogleTest main for test binaries run under mpirun: MPI and Kokkos around the tests, the full
// report from rank 0, the failures of every other rank (prefixed with its rank), and one exit code
// for all ranks: non-zero when a test failed on any of them.
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <cstdio>

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (result.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, result.file_name() ? result.file_name() : "?",
                   result.line_number(), result.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  int failed = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    failed = RUN_ALL_TESTS() != 0;
  }
  int failed_here = failed;
  MPI_Allreduce(&failed_here, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && failed && !failed_here) std::fprintf(stderr, "tests failed on other ranks: see the [rank N] lines\n");
  MPI_Finalize();
  return failed;
}
