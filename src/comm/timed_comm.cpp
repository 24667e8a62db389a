#include "comm/timed_comm.hpp"

#include <chrono>
#include <utility>

namespace trident {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {

// Runs `call`, adding its duration to `total` (and to `tally`'s blocked time when given).
template <class Call>
auto add_duration(double& total, CollectiveTally* tally, Call&& call) {
  struct Stopwatch {
    double& total;
    CollectiveTally* tally;
    double start = steady_seconds();
    ~Stopwatch() {
      const double seconds = steady_seconds() - start;
      total += seconds;
      if (tally) tally->blocked_seconds += seconds;
    }
  } stopwatch{total, tally};
  return call();
}

class TimedRequest final : public CommRequest {
 public:
  TimedRequest(CommRequestPtr inner, double& total, CollectiveTally* tally)
      : inner_(std::move(inner)), total_(total), tally_(tally) {}
  void wait() override {
    add_duration(total_, tally_, [&] { inner_->wait(); });
  }
  bool test() override { return inner_->test(); }

 private:
  CommRequestPtr inner_;
  double& total_;
  CollectiveTally* tally_;  // the owner's tally: the request is waited on before it is taken
};

constexpr std::size_t kFloat = sizeof(float);

}  // namespace

TimedComm::TimedComm(std::unique_ptr<Comm> inner) : inner_(std::move(inner)), alone_(inner_->size() == 1) {}

// A group of one rank never waits for another: its no-op collectives count no time.
template <class Call>
auto TimedComm::blocked(CollectiveTally* tally, Call&& call) {
  if (alone_) return call();
  return add_duration(blocked_seconds_, tally, std::forward<Call>(call));
}

double TimedComm::take_blocked_seconds() { return std::exchange(blocked_seconds_, 0.0); }

CollectiveTallies TimedComm::take_collectives() { return std::exchange(collectives_, CollectiveTallies{}); }

CollectiveTally& TimedComm::called(Collective kind, std::size_t bytes) {
  CollectiveTally& tally = collectives_[static_cast<int>(kind)];
  if (tally.calls++ == 0 && tally.first_call == 0.0) tally.first_call = steady_seconds();  // unless a receive set it
  tally.bytes += static_cast<std::int64_t>(bytes);
  return tally;
}

CommRequestPtr TimedComm::timed(CommRequestPtr request, CollectiveTally* tally) {
  if (alone_) return request;
  return std::make_unique<TimedRequest>(std::move(request), blocked_seconds_, tally);
}

void TimedComm::all_reduce_sum(float* data, std::size_t count) {
  CollectiveTally& tally = called(Collective::all_reduce, count * kFloat);
  blocked(&tally, [&] { inner_->all_reduce_sum(data, count); });
}

double TimedComm::all_reduce_sum(double value) {
  CollectiveTally& tally = called(Collective::all_reduce, sizeof(double));
  return blocked(&tally, [&] { return inner_->all_reduce_sum(value); });
}

void TimedComm::queue_all_reduce_sum(double* data, std::size_t count) {
  CollectiveTally& tally = called(Collective::all_reduce, count * sizeof(double));
  blocked(&tally, [&] { inner_->queue_all_reduce_sum(data, count); });
}

CommRequestPtr TimedComm::all_reduce_sum_async(float* data, std::size_t count) {
  CollectiveTally& tally = called(Collective::all_reduce, count * kFloat);
  return timed(inner_->all_reduce_sum_async(data, count), &tally);
}

void TimedComm::all_gather(const float* send, float* recv, std::size_t count) {
  CollectiveTally& tally = called(Collective::all_gather, count * size() * kFloat);
  blocked(&tally, [&] { inner_->all_gather(send, recv, count); });
}

void TimedComm::all_gather(const std::uint16_t* send, std::uint16_t* recv, std::size_t count) {
  CollectiveTally& tally = called(Collective::all_gather, count * size() * sizeof(std::uint16_t));
  blocked(&tally, [&] { inner_->all_gather(send, recv, count); });
}

void TimedComm::reduce_scatter_sum(const float* send, float* recv, std::size_t count) {
  CollectiveTally& tally = called(Collective::reduce_scatter, count * size() * kFloat);
  blocked(&tally, [&] { inner_->reduce_scatter_sum(send, recv, count); });
}

CommRequestPtr TimedComm::reduce_scatter_sum_async(const float* send, float* recv, std::size_t count) {
  CollectiveTally& tally = called(Collective::reduce_scatter, count * size() * kFloat);
  return timed(inner_->reduce_scatter_sum_async(send, recv, count), &tally);
}

void TimedComm::broadcast(float* data, std::size_t count, int root) {
  blocked(nullptr, [&] { inner_->broadcast(data, count, root); });
}

CommRequestPtr TimedComm::send_async(const float* data, std::size_t count, int peer, int tag) {
  CollectiveTally& tally = called(Collective::point_to_point, count * kFloat);
  return timed(inner_->send_async(data, count, peer, tag), &tally);
}

void TimedComm::all_to_all_v(const float* send, const std::vector<std::size_t>& send_counts, float* recv,
                             const std::vector<std::size_t>& recv_counts) {
  std::size_t to_others = 0;
  for (int peer = 0; peer < size(); ++peer)
    if (peer != rank()) to_others += send_counts.at(peer);
  CollectiveTally& tally = called(Collective::point_to_point, to_others * kFloat);
  blocked(&tally, [&] { inner_->all_to_all_v(send, send_counts, recv, recv_counts); });
}

CommRequestPtr TimedComm::recv_async(float* data, std::size_t count, int peer, int tag) {
  CollectiveTally& tally = collectives_[static_cast<int>(Collective::point_to_point)];
  if (tally.calls == 0) tally.first_call = steady_seconds();  // a receive posted before the first send
  return timed(inner_->recv_async(data, count, peer, tag), &tally);
}

}  // namespace trident
