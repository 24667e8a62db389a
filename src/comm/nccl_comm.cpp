#include "comm/nccl_comm.hpp"

#include <nccl.h>

#include "comm/mpi_comm.hpp"
#include "comm/nccl_request.hpp"
#include "gpu/cuda_check.hpp"

namespace trident {

namespace {

class NcclComm final : public Comm {
 public:
  NcclComm(MPI_Comm axis, cudaStream_t compute_stream, const std::string& name)
      : group_(describe_group(axis, name)), compute_(compute_stream) {
    MPI_Comm_rank(axis, &rank_);
    MPI_Comm_size(axis, &size_);
    ncclUniqueId id;
    if (rank_ == 0) TRIDENT_GPU_CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, axis);
    TRIDENT_GPU_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
    TRIDENT_GPU_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TRIDENT_GPU_CHECK(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming));
    TRIDENT_GPU_CHECK(cudaEventCreateWithFlags(&comm_done_, cudaEventDisableTiming));
    TRIDENT_GPU_CHECK(cudaMalloc(&scalar_, sizeof(double)));
  }
  ~NcclComm() override {
    cudaFree(scalar_);
    cudaEventDestroy(comm_done_);
    cudaEventDestroy(compute_done_);
    cudaStreamDestroy(stream_);
    ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool ordered_on_device() const override { return true; }

  void all_reduce_sum(float* data, std::size_t count) override { all_reduce_sum_async(data, count)->wait(); }
  double all_reduce_sum(double value) override {
    after_compute();
    TRIDENT_GPU_CHECK(cudaMemcpyAsync(scalar_, &value, sizeof value, cudaMemcpyHostToDevice, stream_));
    TRIDENT_GPU_CHECK(ncclAllReduce(scalar_, scalar_, 1, ncclDouble, ncclSum, comm_, stream_));
    TRIDENT_GPU_CHECK(cudaMemcpyAsync(&value, scalar_, sizeof value, cudaMemcpyDeviceToHost, stream_));
    waited_on_host("all-reduce");
    return value;
  }
  CommRequestPtr all_reduce_sum_async(float* data, std::size_t count) override {
    after_compute();
    TRIDENT_GPU_CHECK(ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm_, stream_));
    return queued("all-reduce");
  }
  void queue_all_reduce_sum(double* data, std::size_t count) override {
    after_compute();
    TRIDENT_GPU_CHECK(ncclAllReduce(data, data, count, ncclDouble, ncclSum, comm_, stream_));
    before_compute();
  }
  void all_gather(const float* send, float* recv, std::size_t count) override {
    gather(send, recv, count, ncclFloat);
  }
  void all_gather(const std::uint16_t* send, std::uint16_t* recv, std::size_t count) override {
    gather(send, recv, count, ncclBfloat16);
  }
  void reduce_scatter_sum(const float* send, float* recv, std::size_t count) override {
    reduce_scatter_sum_async(send, recv, count)->wait();
  }
  CommRequestPtr reduce_scatter_sum_async(const float* send, float* recv, std::size_t count) override {
    after_compute();
    TRIDENT_GPU_CHECK(ncclReduceScatter(send, recv, count, ncclFloat, ncclSum, comm_, stream_));
    return queued("reduce-scatter");
  }
  void broadcast(float* data, std::size_t count, int root) override {
    after_compute();
    TRIDENT_GPU_CHECK(ncclBroadcast(data, data, count, ncclFloat, root, comm_, stream_));
    queued("broadcast")->wait();  // the compute stream waits, not the host
  }
  // The tag is not sent (see nccl_comm.hpp): order carries the matching.
  CommRequestPtr send_async(const float* data, std::size_t count, int peer, int /*tag*/) override {
    after_compute();
    TRIDENT_GPU_CHECK(ncclGroupStart());
    TRIDENT_GPU_CHECK(ncclSend(data, count, ncclFloat, peer, comm_, stream_));
    TRIDENT_GPU_CHECK(ncclGroupEnd());
    return queued("send");
  }
  CommRequestPtr recv_async(float* data, std::size_t count, int peer, int /*tag*/) override {
    TRIDENT_GPU_CHECK(ncclGroupStart());
    TRIDENT_GPU_CHECK(ncclRecv(data, count, ncclFloat, peer, comm_, stream_));
    TRIDENT_GPU_CHECK(ncclGroupEnd());
    return queued("receive");
  }

 private:
  // Communication reads what the compute stream has queued so far: the comm stream waits for it.
  void after_compute() {
    TRIDENT_GPU_CHECK(cudaEventRecord(compute_done_, compute_));
    TRIDENT_GPU_CHECK(cudaStreamWaitEvent(stream_, compute_done_, 0));
  }
  // The compute stream's later work waits for what the comm stream has queued so far.
  void before_compute() {
    TRIDENT_GPU_CHECK(cudaEventRecord(comm_done_, stream_));
    TRIDENT_GPU_CHECK(cudaStreamWaitEvent(compute_, comm_done_, 0));
  }
  template <class T>
  void gather(const T* send, T* recv, std::size_t count, ncclDataType_t type) {
    after_compute();
    TRIDENT_GPU_CHECK(ncclAllGather(send, recv, count, type, comm_, stream_));
    queued("all-gather")->wait();  // the compute stream waits, not the host
  }
  // The collective queued last: its wait() orders the compute stream after it (no host wait).
  CommRequestPtr queued(const char* operation) {
    return std::make_unique<NcclRequest>(stream_, operation, group_, compute_);
  }
  // Blocks the host until the work queued on the comm stream is done (a result read on the host).
  void waited_on_host(const char* operation) { NcclRequest(stream_, operation, group_).wait(); }

  std::string group_;  // as the watchdog names it
  int rank_ = 0;
  int size_ = 1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t compute_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t compute_done_ = nullptr;
  cudaEvent_t comm_done_ = nullptr;
  double* scalar_ = nullptr;
};

}  // namespace

std::unique_ptr<Comm> make_nccl_comm(MPI_Comm axis, cudaStream_t compute_stream, const std::string& name) {
  return std::make_unique<NcclComm>(axis, compute_stream, name);
}

}  // namespace trident
