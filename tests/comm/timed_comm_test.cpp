// TimedComm counts the time its caller is blocked in communication and nothing else: a partner
// that arrives late shows up in full, compute between starting an operation and waiting for it
// does not. Lower bounds come from a partner's sleep, which it cannot cut short; the upper bounds
// leave tens of ms for a busy test machine.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdint>
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

// One tally per kind of collective, by the size of its whole buffer, each from its first call.
TEST(TimedComm, TalliesEachKindOfCollective) {
  TimedComm comm = world_comm();
  std::vector<float> values(4, 1.0f), gathered(6), scattered(2);
  const double before = steady_seconds();
  comm.all_reduce_sum(values.data(), values.size());
  comm.all_reduce_sum_async(values.data(), values.size())->wait();
  comm.all_gather(values.data(), gathered.data(), 3);
  comm.reduce_scatter_sum_async(values.data(), scattered.data(), 2)->wait();
  const CollectiveTallies tallies = comm.take_collectives();
  const CollectiveTally& reduce = tallies[static_cast<int>(Collective::all_reduce)];
  const CollectiveTally& gather = tallies[static_cast<int>(Collective::all_gather)];
  const CollectiveTally& scatter = tallies[static_cast<int>(Collective::reduce_scatter)];
  EXPECT_EQ(reduce.calls, 2);
  EXPECT_EQ(reduce.bytes, 2 * 4 * 4);
  EXPECT_EQ(gather.calls, 1);
  EXPECT_EQ(gather.bytes, 2 * 3 * 4);  // the gathered result: size() x count floats
  EXPECT_EQ(scatter.calls, 1);
  EXPECT_EQ(scatter.bytes, 2 * 2 * 4);  // the input: size() x count floats
  const std::vector<std::uint16_t> bits(3, 0x3f80);
  std::vector<std::uint16_t> gathered_bits(6);
  comm.all_gather(bits.data(), gathered_bits.data(), 3);
  EXPECT_EQ(comm.take_collectives()[static_cast<int>(Collective::all_gather)].bytes, 2 * 3 * 2);  // bf16: 2 bytes
  EXPECT_EQ(gathered_bits, std::vector<std::uint16_t>(6, 0x3f80));
  EXPECT_GE(reduce.first_call, before);
  EXPECT_LE(reduce.first_call, gather.first_call);
  EXPECT_LE(gather.first_call, scatter.first_call);
  EXPECT_EQ(comm.take_collectives()[0].calls, 0);  // taken: the tallies start again
}

// A group of one never waits for anyone: nothing is counted.
TEST(TimedComm, AGroupOfOneCountsNoTime) {
  TimedComm comm(make_local_comm());
  std::vector<float> values(1024, 1.0f);
  comm.all_reduce_sum(values.data(), values.size());
  comm.all_reduce_sum_async(values.data(), values.size())->wait();
  EXPECT_EQ(comm.take_blocked_seconds(), 0.0);
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
