#include "comm/nccl_pipeline_comm.hpp"

#include <nccl.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/mpi_comm.hpp"
#include "comm/nccl_comm.hpp"
#include "comm/nccl_request.hpp"
#include "gpu/cuda_check.hpp"

namespace trident {

namespace {

constexpr int kTags = 2;  // the directions: activation, gradient

struct Channel {
  int peer = 0;
  int tag = 0;
  bool sends = false;  // this rank's end: the sender's or the receiver's
  ncclUniqueId id{};
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// Pipeline ranks this rank exchanges messages with: its neighbours, and across the wrap between
// the last rank and the first.
std::set<int> neighbours(int rank, int size) {
  std::set<int> peers;
  if (rank > 0) peers.insert(rank - 1);
  if (rank + 1 < size) peers.insert(rank + 1);
  if (size > 2 && rank == 0) peers.insert(size - 1);
  if (size > 2 && rank == size - 1) peers.insert(0);
  return peers;
}

class NcclPipelineComm final : public Comm {
 public:
  NcclPipelineComm(MPI_Comm axis, cudaStream_t compute_stream)
      : collectives_(make_nccl_comm(axis, compute_stream, "pp")),
        group_(describe_group(axis, "pp")),
        compute_(compute_stream) {
    MPI_Comm_rank(axis, &rank_);
    MPI_Comm_size(axis, &size_);
    TRIDENT_GPU_CHECK(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming));
    for (const int peer : neighbours(rank_, size_))
      for (int tag = 0; tag < kTags; ++tag)
        for (const bool sends : {true, false}) channels_.push_back({peer, tag, sends});
    exchange_ids(axis);
    for (Channel& channel : channels_)
      TRIDENT_GPU_CHECK(cudaStreamCreateWithFlags(&channel.stream, cudaStreamNonBlocking));
    // One group: each initialisation waits for its peer's, in whatever order the peer makes them.
    TRIDENT_GPU_CHECK(ncclGroupStart());
    for (Channel& channel : channels_)
      TRIDENT_GPU_CHECK(ncclCommInitRank(&channel.comm, 2, channel.id, channel.sends ? 0 : 1));
    TRIDENT_GPU_CHECK(ncclGroupEnd());
  }
  ~NcclPipelineComm() override {
    for (Channel& channel : channels_) {
      ncclCommDestroy(channel.comm);
      cudaStreamDestroy(channel.stream);
    }
    cudaEventDestroy(compute_done_);
  }
  NcclPipelineComm(const NcclPipelineComm&) = delete;
  NcclPipelineComm& operator=(const NcclPipelineComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool ordered_on_device() const override { return true; }

  void all_reduce_sum(float* data, std::size_t count) override { collectives_->all_reduce_sum(data, count); }
  double all_reduce_sum(double value) override { return collectives_->all_reduce_sum(value); }
  CommRequestPtr all_reduce_sum_async(float* data, std::size_t count) override {
    return collectives_->all_reduce_sum_async(data, count);
  }
  void queue_all_reduce_sum(double* data, std::size_t count) override {
    collectives_->queue_all_reduce_sum(data, count);
  }
  void all_gather(const float* send, float* recv, std::size_t count) override {
    collectives_->all_gather(send, recv, count);
  }
  void all_gather(const std::uint16_t* send, std::uint16_t* recv, std::size_t count) override {
    collectives_->all_gather(send, recv, count);
  }
  void reduce_scatter_sum(const float* send, float* recv, std::size_t count) override {
    collectives_->reduce_scatter_sum(send, recv, count);
  }
  CommRequestPtr reduce_scatter_sum_async(const float* send, float* recv, std::size_t count) override {
    return collectives_->reduce_scatter_sum_async(send, recv, count);
  }
  void broadcast(float* data, std::size_t count, int root) override { collectives_->broadcast(data, count, root); }

  CommRequestPtr send_async(const float* data, std::size_t count, int peer, int tag) override {
    Channel& channel = find(peer, tag, true);
    after_compute(channel.stream);
    TRIDENT_GPU_CHECK(ncclSend(data, count, ncclFloat, 1, channel.comm, channel.stream));
    return std::make_unique<NcclRequest>(channel.stream, "pipeline send", group_);
  }
  CommRequestPtr recv_async(float* data, std::size_t count, int peer, int tag) override {
    Channel& channel = find(peer, tag, false);
    after_compute(channel.stream);
    TRIDENT_GPU_CHECK(ncclRecv(data, count, ncclFloat, 0, channel.comm, channel.stream));
    return std::make_unique<NcclRequest>(channel.stream, "pipeline receive", group_);
  }

 private:
  // The sender of each channel makes its id and sends it to the receiver, tagged by the channel's
  // tag (one message per source, destination and tag).
  void exchange_ids(MPI_Comm axis) {
    std::vector<MPI_Request> requests;
    for (Channel& channel : channels_) {
      MPI_Request request = MPI_REQUEST_NULL;
      if (channel.sends) {
        TRIDENT_GPU_CHECK(ncclGetUniqueId(&channel.id));
        MPI_Isend(&channel.id, sizeof channel.id, MPI_BYTE, channel.peer, channel.tag, axis, &request);
      } else {
        MPI_Irecv(&channel.id, sizeof channel.id, MPI_BYTE, channel.peer, channel.tag, axis, &request);
      }
      requests.push_back(request);
    }
    MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  }

  Channel& find(int peer, int tag, bool sends) {
    for (Channel& channel : channels_)
      if (channel.peer == peer && channel.tag == tag && channel.sends == sends) return channel;
    throw std::logic_error("NCCL pipeline comm: no channel " + std::string(sends ? "to" : "from") + " pipeline rank " +
                           std::to_string(peer) + " with tag " + std::to_string(tag) +
                           " (neighbours only, tags 0 and 1)");
  }

  void after_compute(cudaStream_t stream) {
    TRIDENT_GPU_CHECK(cudaEventRecord(compute_done_, compute_));
    TRIDENT_GPU_CHECK(cudaStreamWaitEvent(stream, compute_done_, 0));
  }

  std::unique_ptr<Comm> collectives_;
  std::string group_;  // as the watchdog names it
  cudaStream_t compute_ = nullptr;
  cudaEvent_t compute_done_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  std::vector<Channel> channels_;
};

}  // namespace

std::unique_ptr<Comm> make_nccl_pipeline_comm(MPI_Comm axis, cudaStream_t compute_stream) {
  return std::make_unique<NcclPipelineComm>(axis, compute_stream);
}

}  // namespace trident
