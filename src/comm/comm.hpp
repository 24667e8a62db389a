// The one communication interface the model, the executor and the optimizer talk to: a group of
// ranks along one axis of the grid (tp, pp, dp or the embedding group). Buffers are device
// buffers (host memory on the CPU build). The MPI implementation is mpi_comm.hpp; a GPU build adds
// an NCCL one behind the same interface. A group of one rank (LocalComm) turns every collective
// into a no-op, so single-rank code runs the same calls as the parallel code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace trident {

// A non-blocking operation in flight. wait() blocks until it completes; test() only advances it
// (MPI needs such calls for progress while compute runs) and says whether it completed.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;
};

using CommRequestPtr = std::unique_ptr<CommRequest>;

class Comm {
 public:
  virtual ~Comm() = default;

  virtual int rank() const = 0;  // this rank's index in the group (its coordinate on the axis)
  virtual int size() const = 0;
  // Whether operations are ordered after the kernels queued before them by the device itself (NCCL
  // on the compute stream's events), so that the host need not wait for those kernels first.
  virtual bool ordered_on_device() const { return false; }

  // Sums over the group, in place.
  virtual void all_reduce_sum(float* data, std::size_t count) = 0;
  virtual double all_reduce_sum(double value) = 0;
  virtual CommRequestPtr all_reduce_sum_async(float* data, std::size_t count) = 0;
  // Sums device doubles over the group in place, in the device's order: kernels launched after it
  // read the sums, and the host does not wait for them (over NCCL a stream wait; over MPI, host
  // memory on the CPU build, it completes before returning). Step figures that stay on the device.
  virtual void queue_all_reduce_sum(double* data, std::size_t count) = 0;
  // recv[r·count + i] = send_of_rank_r[i]  (recv holds size()·count).
  virtual void all_gather(const float* send, float* recv, std::size_t count) = 0;
  // The same for bf16 bits (activations kept in bf16 under train.precision = "bf16"): moved, never summed.
  virtual void all_gather(const std::uint16_t* send, std::uint16_t* recv, std::size_t count) = 0;
  // recv[i] = Σ_r send_of_rank_r[rank()·count + i]  (send holds size()·count).
  virtual void reduce_scatter_sum(const float* send, float* recv, std::size_t count) = 0;
  virtual CommRequestPtr reduce_scatter_sum_async(const float* send, float* recv, std::size_t count) = 0;
  virtual void broadcast(float* data, std::size_t count, int root) = 0;
  // Point to point with the rank of index `peer` in this group; tags tell messages apart.
  virtual CommRequestPtr send_async(const float* data, std::size_t count, int peer, int tag) = 0;
  virtual CommRequestPtr recv_async(float* data, std::size_t count, int peer, int tag) = 0;
  // MPI_Alltoallv's semantics (a mixture's tokens to their experts' ranks and back): send_counts[p]
  // floats of `send` go to peer p, the pieces one after the other in peer order, and what peer p
  // sends this rank lands likewise in `recv` (recv_counts[p] floats, which must be what p sends).
  // Blocks until done. Made of send_async and recv_async (comm/all_to_all.cpp) unless the group
  // has its own (MPI_Alltoallv).
  virtual void all_to_all_v(const float* send, const std::vector<std::size_t>& send_counts, float* recv,
                            const std::vector<std::size_t>& recv_counts);
};

// The group of this rank alone.
std::unique_ptr<Comm> make_local_comm();

}  // namespace trident
