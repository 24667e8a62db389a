#include "comm/timed_comm.hpp"

#include <chrono>
#include <utility>

namespace trident {

namespace {

// Runs `call`, adding its duration to `total`.
template <class Call>
auto add_duration(double& total, Call&& call) {
  struct Stopwatch {
    double& total;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    ~Stopwatch() { total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
  } stopwatch{total};
  return call();
}

class TimedRequest final : public CommRequest {
 public:
  TimedRequest(CommRequestPtr inner, double& total) : inner_(std::move(inner)), total_(total) {}
  void wait() override {
    add_duration(total_, [&] { inner_->wait(); });
  }
  bool test() override { return inner_->test(); }

 private:
  CommRequestPtr inner_;
  double& total_;
};

}  // namespace

TimedComm::TimedComm(std::unique_ptr<Comm> inner) : inner_(std::move(inner)) {}

double TimedComm::take_blocked_seconds() { return std::exchange(blocked_seconds_, 0.0); }

CommRequestPtr TimedComm::timed(CommRequestPtr request) {
  return std::make_unique<TimedRequest>(std::move(request), blocked_seconds_);
}

void TimedComm::all_reduce_sum(float* data, std::size_t count) {
  add_duration(blocked_seconds_, [&] { inner_->all_reduce_sum(data, count); });
}

double TimedComm::all_reduce_sum(double value) {
  return add_duration(blocked_seconds_, [&] { return inner_->all_reduce_sum(value); });
}

CommRequestPtr TimedComm::all_reduce_sum_async(float* data, std::size_t count) {
  return timed(inner_->all_reduce_sum_async(data, count));
}

void TimedComm::all_gather(const float* send, float* recv, std::size_t count) {
  add_duration(blocked_seconds_, [&] { inner_->all_gather(send, recv, count); });
}

void TimedComm::reduce_scatter_sum(const float* send, float* recv, std::size_t count) {
  add_duration(blocked_seconds_, [&] { inner_->reduce_scatter_sum(send, recv, count); });
}

CommRequestPtr TimedComm::reduce_scatter_sum_async(const float* send, float* recv, std::size_t count) {
  return timed(inner_->reduce_scatter_sum_async(send, recv, count));
}

void TimedComm::broadcast(float* data, std::size_t count, int root) {
  add_duration(blocked_seconds_, [&] { inner_->broadcast(data, count, root); });
}

CommRequestPtr TimedComm::send_async(const float* data, std::size_t count, int peer, int tag) {
  return timed(inner_->send_async(data, count, peer, tag));
}

CommRequestPtr TimedComm::recv_async(float* data, std::size_t count, int peer, int tag) {
  return timed(inner_->recv_async(data, count, peer, tag));
}

}  // namespace trident
