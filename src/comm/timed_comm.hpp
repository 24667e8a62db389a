// A Comm that counts the time its caller spends blocked in communication: inside blocking
// collectives and in wait() on requests it returned. That is the communication the caller did not
// hide behind compute (the timeline's tp_comm_s). Everything is forwarded unchanged to the
// wrapped Comm.
#pragma once

#include <memory>

#include "comm/comm.hpp"

namespace trident {

class TimedComm final : public Comm {
 public:
  explicit TimedComm(std::unique_ptr<Comm> inner);

  // Seconds spent blocked since the last call (or construction); starts the count again.
  double take_blocked_seconds();

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void all_reduce_sum(float* data, std::size_t count) override;
  double all_reduce_sum(double value) override;
  CommRequestPtr all_reduce_sum_async(float* data, std::size_t count) override;
  void all_gather(const float* send, float* recv, std::size_t count) override;
  void reduce_scatter_sum(const float* send, float* recv, std::size_t count) override;
  CommRequestPtr reduce_scatter_sum_async(const float* send, float* recv, std::size_t count) override;
  void broadcast(float* data, std::size_t count, int root) override;
  CommRequestPtr send_async(const float* data, std::size_t count, int peer, int tag) override;
  CommRequestPtr recv_async(float* data, std::size_t count, int peer, int tag) override;

 private:
  CommRequestPtr timed(CommRequestPtr request);

  std::unique_ptr<Comm> inner_;
  double blocked_seconds_ = 0.0;
};

}  // namespace trident
