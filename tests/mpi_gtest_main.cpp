// GoogleTest main for the test binaries run under mpirun -n N (dp, tp, events). Rank 0 prints
// the usual report; the other ranks print only their failures, tagged with their rank. Every rank
// exits with the verdict of all, so a failure seen on one rank fails the run (and a skip is a
// skip only when every rank skipped: gtest_exit_code.hpp).
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <gtest/gtest.h>

#include "gtest_exit_code.hpp"

namespace {

class RankFailurePrinter final : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, result.file_name() ? result.file_name() : "?",
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
  int failed = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    if (rank != 0) {
      ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new RankFailurePrinter(rank));
    }
    failed = RUN_ALL_TESTS();
  }
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  int skipped_here = trident::testing::all_tests_skipped() ? 1 : 0;
  int skipped_everywhere = 0;
  MPI_Allreduce(&skipped_here, &skipped_everywhere, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Finalize();
  return trident::testing::gtest_exit_code(any_failed != 0, skipped_everywhere != 0);
}
