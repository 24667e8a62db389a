// Comm::all_to_all_v over a real MPI group of 2 ranks: MPI_Alltoallv (MpiComm, through a TimedComm
// that counts the bytes sent to the other rank as point-to-point traffic) and the point-to-point
// form every other group uses (here HostStagedComm's), with uneven pieces, an empty one and a
// rank's piece for itself.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/host_staged_comm.hpp"
#include "comm/mpi_comm.hpp"
#include "comm/timed_comm.hpp"

namespace trident {
namespace {

// Rank r sends peer p (r + 1) · (p + 1) − 1 floats: rank 0 sends itself nothing.
std::vector<std::size_t> counts_from(int rank, int size) {
  std::vector<std::size_t> counts;
  for (int peer = 0; peer < size; ++peer) counts.push_back(static_cast<std::size_t>((rank + 1) * (peer + 1) - 1));
  return counts;
}

// Every piece arrives in rank order, valued 100 · source + 10 · destination + its index.
void expect_every_piece_arrives(Comm& comm) {
  const int rank = comm.rank(), size = comm.size();
  const std::vector<std::size_t> send_counts = counts_from(rank, size);
  std::vector<std::size_t> recv_counts;
  std::size_t total = 0;
  for (int source = 0; source < size; ++source) total += recv_counts.emplace_back(counts_from(source, size)[rank]);
  std::vector<float> send, recv(total, -1.0f);
  for (int peer = 0; peer < size; ++peer)
    for (std::size_t i = 0; i < send_counts[peer]; ++i) send.push_back(100.0f * rank + 10.0f * peer + i);
  comm.all_to_all_v(send.data(), send_counts, recv.data(), recv_counts);
  std::size_t at = 0;
  for (int source = 0; source < size; ++source)
    for (std::size_t i = 0; i < recv_counts[source]; ++i, ++at)
      EXPECT_EQ(recv[at], 100.0f * source + 10.0f * rank + i) << "from " << source << " element " << i;
}

TEST(AllToAll, MpiAlltoallvDeliversEveryPieceAndIsTimedAsItsSends) {
  TimedComm comm(make_mpi_comm(MPI_COMM_WORLD));
  ASSERT_EQ(comm.size(), 2);
  comm.take_collectives();
  expect_every_piece_arrives(comm);
  const CollectiveTally sent = comm.take_collectives()[static_cast<int>(Collective::point_to_point)];
  EXPECT_EQ(sent.calls, 1);
  EXPECT_EQ(sent.bytes, static_cast<std::int64_t>(counts_from(comm.rank(), 2)[1 - comm.rank()] * sizeof(float)));
}

TEST(AllToAll, PointToPointFormDeliversEveryPiece) {
  const std::unique_ptr<Comm> comm = make_host_staged_comm(make_mpi_comm(MPI_COMM_WORLD));
  expect_every_piece_arrives(*comm);
}

}  // namespace
}  // namespace trident
