// A Comm that counts the time its caller spends blocked in communication: inside blocking
// collectives and in wait() on requests it returned. That is the communication the caller did not
// hide behind compute (the timeline's tp_comm_s and cp_comm_s). It also tallies each kind of
// collective (the timeline's ALLREDUCE_TP, ALLGATHER_TP and REDUCE_SCATTER_TP events, one per kind
// and pipeline action) and the point-to-point messages (ring attention's hops: RING_CP; a
// mixture's all-to-alls: ALLTOALL_EP).
// Everything is forwarded unchanged to the wrapped Comm.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "comm/comm.hpp"

namespace trident {

enum class Collective { all_reduce, all_gather, reduce_scatter, point_to_point };
inline constexpr int kCollectiveKinds = 4;

// One kind of collective since the last take_collectives(): how many were called, the bytes of
// their whole buffers (an all-reduce's, the all-gather's result, the reduce-scatter's input; of
// point-to-point messages the sends'), when the first was called and how long the caller was
// blocked in them (seconds on steady_clock; point-to-point: in the waits of sends and receives).
struct CollectiveTally {
  int calls = 0;
  std::int64_t bytes = 0;
  double first_call = 0.0;
  double blocked_seconds = 0.0;
};
using CollectiveTallies = std::array<CollectiveTally, kCollectiveKinds>;  // indexed by Collective

// steady_clock's reading in seconds: the time axis of CollectiveTally.
double steady_seconds();

class TimedComm final : public Comm {
 public:
  explicit TimedComm(std::unique_ptr<Comm> inner);

  // Seconds spent blocked since the last call (or construction); starts the count again.
  double take_blocked_seconds();
  // The collectives since the last call (or construction); starts the tallies again.
  CollectiveTallies take_collectives();

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  bool ordered_on_device() const override { return inner_->ordered_on_device(); }
  void all_reduce_sum(float* data, std::size_t count) override;
  double all_reduce_sum(double value) override;
  CommRequestPtr all_reduce_sum_async(float* data, std::size_t count) override;
  void queue_all_reduce_sum(double* data, std::size_t count) override;
  void all_gather(const float* send, float* recv, std::size_t count) override;
  void all_gather(const std::uint16_t* send, std::uint16_t* recv, std::size_t count) override;
  void reduce_scatter_sum(const float* send, float* recv, std::size_t count) override;
  CommRequestPtr reduce_scatter_sum_async(const float* send, float* recv, std::size_t count) override;
  void broadcast(float* data, std::size_t count, int root) override;
  CommRequestPtr send_async(const float* data, std::size_t count, int peer, int tag) override;
  CommRequestPtr recv_async(float* data, std::size_t count, int peer, int tag) override;
  // Tallied as point-to-point traffic: the bytes sent to the other ranks, the whole call blocked.
  void all_to_all_v(const float* send, const std::vector<std::size_t>& send_counts, float* recv,
                    const std::vector<std::size_t>& recv_counts) override;

 private:
  CommRequestPtr timed(CommRequestPtr request, CollectiveTally* tally = nullptr);
  template <class Call>
  auto blocked(CollectiveTally* tally, Call&& call);
  // The tally of `kind`, with one call of `bytes` added.
  CollectiveTally& called(Collective kind, std::size_t bytes);

  std::unique_ptr<Comm> inner_;
  bool alone_;  // a group of one rank
  double blocked_seconds_ = 0.0;
  CollectiveTallies collectives_{};
};

}  // namespace trident
