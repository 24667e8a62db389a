#include "comm/host_staged_comm.hpp"

#include <string>
#include <utility>

#include "kernels/device.hpp"

namespace trident {

namespace {

template <class T>
using HostBuffer = Kokkos::View<T*, Kokkos::HostSpace>;
using HostFloats = HostBuffer<float>;
using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

template <class T = float>
HostBuffer<T> host_buffer(std::size_t count) {
  return HostBuffer<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("host_staged")), count);
}

template <class T>
HostBuffer<T> to_host(const T* device, std::size_t count) {
  HostBuffer<T> host = host_buffer<T>(count);
  Kokkos::deep_copy(host, Kokkos::View<const T*, MemSpace, Unmanaged>(device, count));
  return host;
}

template <class T>
void to_device(T* device, const HostBuffer<T>& host) {
  Kokkos::deep_copy(Kokkos::View<T*, MemSpace, Unmanaged>(device, host.extent(0)), host);
}

// Keeps the host buffers alive while the wrapped operation runs, and copies its result (if any)
// to the device once, when it is seen complete.
class StagedRequest final : public CommRequest {
 public:
  StagedRequest(HostFloats input, HostFloats result, float* device_result, CommRequestPtr inner)
      : input_(std::move(input)), result_(std::move(result)), device_result_(device_result), inner_(std::move(inner)) {}
  void wait() override {
    if (done_) return;
    inner_->wait();
    finish();
  }
  bool test() override {
    if (!done_ && inner_->test()) finish();
    return done_;
  }

 private:
  void finish() {
    if (device_result_) to_device(device_result_, result_);
    done_ = true;
  }
  // Declared before inner_: an unfinished inner request completes (in its destructor) before the
  // buffers it uses are freed.
  HostFloats input_, result_;
  float* device_result_;
  CommRequestPtr inner_;
  bool done_ = false;
};

class HostStagedComm final : public Comm {
 public:
  explicit HostStagedComm(std::unique_ptr<Comm> host_comm) : host_(std::move(host_comm)) {}

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }

  void all_reduce_sum(float* data, std::size_t count) override {
    const HostFloats host = to_host(data, count);
    host_->all_reduce_sum(host.data(), count);
    to_device(data, host);
  }
  double all_reduce_sum(double value) override { return host_->all_reduce_sum(value); }
  void queue_all_reduce_sum(double* data, std::size_t count) override {
    const Kokkos::View<double*, MemSpace, Unmanaged> device(data, count);
    const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), device);
    host_->queue_all_reduce_sum(host.data(), count);
    Kokkos::deep_copy(device, host);
  }
  CommRequestPtr all_reduce_sum_async(float* data, std::size_t count) override {
    HostFloats host = to_host(data, count);
    CommRequestPtr inner = host_->all_reduce_sum_async(host.data(), count);
    return std::make_unique<StagedRequest>(HostFloats(), host, data, std::move(inner));
  }
  void all_gather(const float* send, float* recv, std::size_t count) override { gather(send, recv, count); }
  void all_gather(const std::uint16_t* send, std::uint16_t* recv, std::size_t count) override {
    gather(send, recv, count);
  }
  void reduce_scatter_sum(const float* send, float* recv, std::size_t count) override {
    reduce_scatter_sum_async(send, recv, count)->wait();
  }
  CommRequestPtr reduce_scatter_sum_async(const float* send, float* recv, std::size_t count) override {
    HostFloats host_send = to_host(send, size() * count), host_recv = host_buffer(count);
    CommRequestPtr inner = host_->reduce_scatter_sum_async(host_send.data(), host_recv.data(), count);
    return std::make_unique<StagedRequest>(host_send, host_recv, recv, std::move(inner));
  }
  void broadcast(float* data, std::size_t count, int root) override {
    const HostFloats host = to_host(data, count);
    host_->broadcast(host.data(), count, root);
    to_device(data, host);
  }
  CommRequestPtr send_async(const float* data, std::size_t count, int peer, int tag) override {
    HostFloats host = to_host(data, count);
    CommRequestPtr inner = host_->send_async(host.data(), count, peer, tag);
    return std::make_unique<StagedRequest>(host, HostFloats(), nullptr, std::move(inner));
  }
  CommRequestPtr recv_async(float* data, std::size_t count, int peer, int tag) override {
    HostFloats host = host_buffer(count);
    CommRequestPtr inner = host_->recv_async(host.data(), count, peer, tag);
    return std::make_unique<StagedRequest>(HostFloats(), host, data, std::move(inner));
  }

 private:
  template <class T>
  void gather(const T* send, T* recv, std::size_t count) {
    const HostBuffer<T> host_send = to_host(send, count), host_recv = host_buffer<T>(size() * count);
    host_->all_gather(host_send.data(), host_recv.data(), count);
    to_device(recv, host_recv);
  }

  std::unique_ptr<Comm> host_;
};

}  // namespace

std::unique_ptr<Comm> make_host_staged_comm(std::unique_ptr<Comm> host_comm) {
  return std::make_unique<HostStagedComm>(std::move(host_comm));
}

}  // namespace trident
