// TimedComm counts the time its caller is blocked in communication and nothing else: a partner
// that arrives late shows up in full, compute between starting an operation and waiting for it
// does not. Lower bounds come from a partner's sleep, which it cannot cut short; the upper bounds
// leave tens of ms for a busy test machine.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <thread>
#include <vector>

#include "comm/mpi_comm.hpp"
#include "comm/timed_comm.hpp"
#include "mpi_world.hpp"

namespace trident {
namespace {

using testing_mpi::world_rank;

constexpr auto kLate = std::chrono::milliseconds(200);
constexpr double kLateSeconds = 0.2;

TimedComm world_comm() { return TimedComm(make_mpi_comm(MPI_COMM_WORLD)); }

TEST(TimedComm, ForwardsToTheWrappedGroup) {
  TimedComm comm = world_comm();
  EXPECT_EQ(comm.rank(), world_rank());
  EXPECT_EQ(comm.size(), 2);
  std::vector<float> values = {1.0f + comm.rank(), 10.0f};
  comm.all_reduce_sum(values.data(), values.size());
  EXPECT_EQ(values[0], 3.0f);
  EXPECT_EQ(values[1], 20.0f);
  EXPECT_EQ(comm.all_reduce_sum(0.5), 1.0);
  std::vector<float> gathered(2);
  const float mine = 7.0f * comm.rank();
  comm.all_gather(&mine, gathered.data(), 1);
  EXPECT_EQ(gathered[1], 7.0f);
}

TEST(TimedComm, CountsTheWaitForALatePartnerInABlockingCollective) {
  TimedComm comm = world_comm();
  comm.take_blocked_seconds();
  if (comm.rank() == 1) std::this_thread::sleep_for(kLate);
  float value = 1.0f;
  comm.all_reduce_sum(&value, 1);
  const double blocked = comm.take_blocked_seconds();
  if (comm.rank() == 0) {
    EXPECT_GE(blocked, 0.9 * kLateSeconds);
  } else {
    EXPECT_LT(blocked, 0.5 * kLateSeconds);
  }
  EXPECT_EQ(value, 2.0f);
  EXPECT_LT(comm.take_blocked_seconds(), 1e-9) << "taking the count starts it again";
}

TEST(TimedComm, CountsWaitButNotTheComputeBeforeIt) {
  TimedComm comm = world_comm();
  comm.take_blocked_seconds();
  float value = 1.0f;
  if (comm.rank() == 0) {
    // Rank 0 starts the sum, computes while rank 1 is already there, then waits: only the wait counts.
    const CommRequestPtr sum = comm.all_reduce_sum_async(&value, 1);
    std::this_thread::sleep_for(kLate);
    sum->wait();
    EXPECT_LT(comm.take_blocked_seconds(), 0.5 * kLateSeconds);
  } else {
    // Rank 1 waits at once for a partner that computes first: the whole wait counts.
    const CommRequestPtr sum = comm.all_reduce_sum_async(&value, 1);
    sum->wait();
    EXPECT_GE(comm.take_blocked_seconds(), 0.9 * kLateSeconds);
  }
  EXPECT_EQ(value, 2.0f);
}

TEST(TimedComm, ASingleRankGroupBlocksForNoTime) {
  TimedComm comm(make_local_comm());
  float value = 3.0f;
  comm.all_reduce_sum(&value, 1);
  comm.all_reduce_sum_async(&value, 1)->wait();
  EXPECT_EQ(value, 3.0f);
  EXPECT_LT(comm.take_blocked_seconds(), 1e-3);
}

}  // namespace
}  // namespace trident
