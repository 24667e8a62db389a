// NcclComm on 1 and 2 ranks (one GPU each): every collective and ordered point-to-point messages,
// against values each rank can compute. Skipped by name where there is no GPU, or fewer GPUs on the
// node than ranks (NCCL needs a GPU per rank).
#include "comm/nccl_comm.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <vector>

#include "comm/nccl_pipeline_comm.hpp"
#include "device_vector.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_selection.hpp"
#include "gpu_available.hpp"
#include "mpi_world.hpp"

namespace trident {
namespace {

using testing_mpi::world_rank;
using testing_mpi::world_size;

using DeviceFloats = DeviceVector<float>;

// A Comm over the world on one GPU per rank; the test skips where the node has fewer GPUs than
// ranks (NCCL needs a GPU per rank).
using MakeComm = std::unique_ptr<Comm> (*)();
std::unique_ptr<Comm> world_nccl_comm() { return make_nccl_comm(MPI_COMM_WORLD); }
std::unique_ptr<Comm> world_nccl_pipeline_comm() { return make_nccl_pipeline_comm(MPI_COMM_WORLD); }

template <MakeComm kMakeComm>
class GpuCommTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TRIDENT_SKIP_WITHOUT_GPU();
    const NodePlacement placement = node_placement(MPI_COMM_WORLD);
    int devices = 0;
    TRIDENT_GPU_CHECK(cudaGetDeviceCount(&devices));
    if (devices < placement.local_ranks)
      GTEST_SKIP() << "skipped: " << placement.local_ranks << " ranks on this node but " << devices << " GPU(s)";
    select_device(MPI_COMM_WORLD);
    comm = kMakeComm();
  }
  std::unique_ptr<Comm> comm;
};
using NcclCommTest = GpuCommTest<&world_nccl_comm>;
using NcclPipelineCommTest = GpuCommTest<&world_nccl_pipeline_comm>;

TEST_F(NcclCommTest, AllReduceSumsEveryRanksValues) {
  const int r = world_rank(), n = world_size();
  DeviceFloats data(std::vector<float>{1.0f + r, 10.0f * r, -2.0f});
  comm->all_reduce_sum(data.data, 3);
  const float ranks_sum = n * (n - 1) / 2.0f;
  EXPECT_EQ(data.to_host(), (std::vector<float>{n + ranks_sum, 10.0f * ranks_sum, -2.0f * n}));
  EXPECT_DOUBLE_EQ(comm->all_reduce_sum(0.5 + r), 0.5 * n + ranks_sum);
}

TEST_F(NcclCommTest, AllGatherAndReduceScatterAreEachOthersShapes) {
  const int r = world_rank(), n = world_size();
  DeviceFloats mine(std::vector<float>{static_cast<float>(r), static_cast<float>(r) + 0.5f});
  DeviceFloats gathered(std::vector<float>(2 * n, -1.0f));
  comm->all_gather(mine.data, gathered.data, 2);
  const auto all = gathered.to_host();
  for (int q = 0; q < n; ++q) EXPECT_EQ(all[2 * q], q) << "block of rank " << q;

  std::vector<float> send(2 * n);
  for (int i = 0; i < 2 * n; ++i) send[i] = static_cast<float>(i * (r + 1));
  DeviceFloats send_device(send), recv(std::vector<float>(2, 0.0f));
  comm->reduce_scatter_sum_async(send_device.data, recv.data, 2)->wait();
  const float rank_factor = n * (n + 1) / 2.0f;  // Σ (q + 1)
  EXPECT_EQ(recv.to_host(), (std::vector<float>{2 * r * rank_factor, (2 * r + 1) * rank_factor}));
}

// bf16 bits (an activation kept in bf16) are moved as they are, a NaN's payload included.
TEST_F(NcclCommTest, AllGathersBf16BitsAsTheyAre) {
  const int r = world_rank(), n = world_size();
  DeviceVector<std::uint16_t> mine(std::vector<std::uint16_t>{static_cast<std::uint16_t>(0x7fc0 + r), 0x8000});
  DeviceVector<std::uint16_t> gathered(std::vector<std::uint16_t>(2 * n, 0));
  comm->all_gather(mine.data, gathered.data, 2);
  const std::vector<std::uint16_t> all = gathered.to_host();
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(all[2 * q], 0x7fc0 + q) << "block of rank " << q;
    EXPECT_EQ(all[2 * q + 1], 0x8000) << "block of rank " << q;
  }
}

TEST_F(NcclCommTest, BroadcastCopiesTheRootsBuffer) {
  DeviceFloats data(std::vector<float>(5, static_cast<float>(world_rank())));
  comm->broadcast(data.data, 5, world_size() - 1);
  EXPECT_EQ(data.to_host(), std::vector<float>(5, static_cast<float>(world_size() - 1)));
}

TEST_F(NcclCommTest, PointToPointMessagesArriveInTheOrderTheyWereSent) {
  const int r = world_rank(), peer = r ^ 1;
  ASSERT_LT(peer, world_size()) << "run on an even number of ranks";
  std::vector<DeviceFloats> sent, received;
  for (int i = 0; i < 3; ++i) {
    sent.emplace_back(std::vector<float>(4, static_cast<float>(100 * r + i)));
    received.emplace_back(std::vector<float>(4, -1.0f));
  }
  std::vector<CommRequestPtr> requests;
  for (int i = 0; i < 3; ++i) {  // the even rank sends first, so the two issue orders pair up
    if (r % 2 == 0) requests.push_back(comm->send_async(sent[i].data, 4, peer, i));
    requests.push_back(comm->recv_async(received[i].data, 4, peer, i));
    if (r % 2 == 1) requests.push_back(comm->send_async(sent[i].data, 4, peer, i));
  }
  for (auto& request : requests) request->wait();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(received[i].to_host(), std::vector<float>(4, static_cast<float>(100 * peer + i)));
}

// Each rank posts all its receives first, both directions, as the executor posts them ahead, and
// only then sends: on one communicator the early receives would hold up the sends behind them and
// neither rank would finish. Each channel delivers in posting order.
TEST_F(NcclPipelineCommTest, ReceivesPostedAheadHoldUpNoSendAndEachChannelKeepsItsOrder) {
  const int r = world_rank(), peer = r ^ 1;
  ASSERT_LT(peer, world_size()) << "run on an even number of ranks";
  constexpr int kMessages = 3, kTags = 2;
  std::vector<DeviceFloats> sent, received;
  for (int tag = 0; tag < kTags; ++tag) {
    for (int i = 0; i < kMessages; ++i) {
      sent.emplace_back(std::vector<float>(4, static_cast<float>(100 * r + 10 * tag + i)));
      received.emplace_back(std::vector<float>(4, -1.0f));
    }
  }
  std::vector<CommRequestPtr> requests;
  for (int k = 0; k < kTags * kMessages; ++k)
    requests.push_back(comm->recv_async(received[k].data, 4, peer, k / kMessages));
  for (int k = 0; k < kTags * kMessages; ++k)
    requests.push_back(comm->send_async(sent[k].data, 4, peer, k / kMessages));
  for (auto& request : requests) request->wait();
  for (int k = 0; k < kTags * kMessages; ++k)
    EXPECT_EQ(received[k].to_host(),
              std::vector<float>(4, static_cast<float>(100 * peer + 10 * (k / kMessages) + k % kMessages)))
        << "message " << k % kMessages << " of tag " << k / kMessages;
  EXPECT_DOUBLE_EQ(comm->all_reduce_sum(1.0), world_size());  // its collectives run on the whole group
}

}  // namespace
}  // namespace trident
