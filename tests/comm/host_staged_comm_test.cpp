// HostStagedComm gives the same results as the Comm it wraps, for every operation, with the data
// in device buffers (host memory on the CPU build, GPU memory on the GPU build) and the wrapped
// MPI group working on its host copies.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <vector>

#include "comm/host_staged_comm.hpp"
#include "comm/mpi_comm.hpp"
#include "kernels/device.hpp"
#include "mpi_world.hpp"

namespace trident {
namespace {

std::unique_ptr<Comm> staged_world() { return make_host_staged_comm(make_mpi_comm(MPI_COMM_WORLD)); }

FloatBuffer device_floats(const std::vector<float>& values) {
  FloatBuffer buffer("values", values.size());
  const auto host = Kokkos::create_mirror_view(buffer);
  for (std::size_t i = 0; i < values.size(); ++i) host(i) = values[i];
  Kokkos::deep_copy(buffer, host);
  return buffer;
}

std::vector<float> host_floats(const FloatBuffer& buffer) {
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), buffer);
  return std::vector<float>(host.data(), host.data() + host.extent(0));
}

TEST(HostStagedComm, AllReduceBlockingAndAsync) {
  const auto comm = staged_world();
  const int n = comm->size(), r = comm->rank();
  FloatBuffer values = device_floats({1.0f + r, 10.0f});
  comm->all_reduce_sum(values.data(), 2);
  EXPECT_EQ(host_floats(values), (std::vector<float>{n * (n + 1) / 2.0f, 10.0f * n}));

  FloatBuffer later = device_floats({2.0f * r, 1.0f});
  auto request = comm->all_reduce_sum_async(later.data(), 2);
  request->wait();
  EXPECT_EQ(host_floats(later), (std::vector<float>{static_cast<float>(n * (n - 1)), static_cast<float>(n)}));
  EXPECT_EQ(comm->all_reduce_sum(0.25), 0.25 * n);
}

TEST(HostStagedComm, GatherScatterAndBroadcast) {
  const auto comm = staged_world();
  const int n = comm->size(), r = comm->rank();
  FloatBuffer mine = device_floats({1.0f * r, 100.0f + r});
  FloatBuffer all("all", 2 * n);
  comm->all_gather(mine.data(), all.data(), 2);
  const std::vector<float> gathered = host_floats(all);
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(gathered[2 * q], 1.0f * q);
    EXPECT_EQ(gathered[2 * q + 1], 100.0f + q);
  }

  // Every rank sends element i = i; the piece of rank r sums n copies of elements 2r and 2r + 1.
  std::vector<float> send(2 * n);
  for (int i = 0; i < 2 * n; ++i) send[i] = static_cast<float>(i);
  FloatBuffer send_buffer = device_floats(send), piece("piece", 2);
  comm->reduce_scatter_sum_async(send_buffer.data(), piece.data(), 2)->wait();
  EXPECT_EQ(host_floats(piece), (std::vector<float>{2.0f * r * n, (2.0f * r + 1) * n}));

  FloatBuffer root_value = device_floats({r == n - 1 ? 42.0f : -1.0f});
  comm->broadcast(root_value.data(), 1, n - 1);
  EXPECT_EQ(host_floats(root_value), std::vector<float>{42.0f});
}

// bf16 bits (an activation kept in bf16) are gathered as they are, whatever they would mean as
// numbers: a NaN's payload, a negative zero, a subnormal.
TEST(HostStagedComm, GathersBf16BitsAsTheyAre) {
  const auto comm = staged_world();
  const int n = comm->size(), r = comm->rank();
  const std::vector<std::uint16_t> patterns = {0x7fc1, 0x8000, 0x0001, 0x3f80};
  Bf16Buffer mine("mine", 2), all("all", 2 * n);
  const auto host_mine = Kokkos::create_mirror_view(mine);
  host_mine(0) = patterns[r % 4];
  host_mine(1) = static_cast<std::uint16_t>(0x4000 + r);
  Kokkos::deep_copy(mine, host_mine);
  comm->all_gather(mine.data(), all.data(), 2);
  const auto gathered = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), all);
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(gathered(2 * q), patterns[q % 4]) << q;
    EXPECT_EQ(gathered(2 * q + 1), 0x4000 + q) << q;
  }
}

TEST(HostStagedComm, PointToPointReachesTheDeviceBufferOnCompletion) {
  const auto comm = staged_world();
  const int n = comm->size(), r = comm->rank();
  const int next = (r + 1) % n, previous = (r + n - 1) % n;
  FloatBuffer outgoing = device_floats({10.0f * r, 10.0f * r + 1}), incoming = device_floats({-1.0f, -1.0f});
  auto receive = comm->recv_async(incoming.data(), 2, previous, 7);
  auto send = comm->send_async(outgoing.data(), 2, next, 7);
  Kokkos::deep_copy(outgoing, 0.0f);  // the message left with the values at send time
  while (!receive->test()) {
  }
  send->wait();
  EXPECT_EQ(host_floats(incoming), (std::vector<float>{10.0f * previous, 10.0f * previous + 1}));
  EXPECT_TRUE(receive->test());  // stays complete, and copies once
}

}  // namespace
}  // namespace trident
