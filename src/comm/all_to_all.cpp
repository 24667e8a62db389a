// Comm::all_to_all_v for any group, from its point-to-point messages (NCCL's channels, MPI through
// host copies); MpiComm has MPI_Alltoallv instead.
#include <stdexcept>

#include "comm/comm.hpp"
#include "kernels/copy.hpp"

namespace trident {

namespace {

constexpr int kAllToAllTag = 7300;  // one tag: between two ranks the pieces go in posting order

}  // namespace

void Comm::all_to_all_v(const float* send, const std::vector<std::size_t>& send_counts, float* recv,
                        const std::vector<std::size_t>& recv_counts) {
  const int ranks = size(), me = rank();
  if (static_cast<int>(send_counts.size()) != ranks || static_cast<int>(recv_counts.size()) != ranks ||
      send_counts[me] != recv_counts[me])
    throw std::logic_error("all_to_all_v: one count per rank of the group, a rank's piece for itself alike");
  std::vector<CommRequestPtr> requests;
  std::size_t received = 0, own_place = 0;
  // Every receive is posted before any send, so no order of the ranks' calls can deadlock.
  for (int peer = 0; peer < ranks; ++peer) {
    if (peer == me) own_place = received;
    if (peer != me && recv_counts[peer] > 0)
      requests.push_back(recv_async(recv + received, recv_counts[peer], peer, kAllToAllTag));
    received += recv_counts[peer];
  }
  std::size_t sent = 0, own = 0;
  for (int peer = 0; peer < ranks; ++peer) {
    if (peer == me) own = sent;
    if (peer != me && send_counts[peer] > 0)
      requests.push_back(send_async(send + sent, send_counts[peer], peer, kAllToAllTag));
    sent += send_counts[peer];
  }
  copy_floats(recv + own_place, send + own, send_counts[me]);
  for (const CommRequestPtr& request : requests) request->wait();
}

}  // namespace trident
