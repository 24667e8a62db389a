#include "comm/mpi_comm.hpp"

#include <algorithm>
#include <climits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/watchdog.hpp"

namespace trident {

namespace {

void check(int code, const char* operation) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(std::string("MPI ") + operation + " failed: " + std::string(text, length));
}

int as_count(std::size_t count) {
  if (count > static_cast<std::size_t>(INT_MAX))
    throw std::length_error("message of " + std::to_string(count) + " floats exceeds MPI's int count");
  return static_cast<int>(count);
}

class MpiRequest final : public CommRequest {
 public:
  MpiRequest(MPI_Request request, const char* operation, const std::string& group)
      : request_(request), operation_(operation), group_(group) {}
  // A request must not outlive its buffers unfinished: complete it rather than leak it.
  ~MpiRequest() override {
    if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  void wait() override {
    const BlockedIn watched(operation_, group_);
    check(MPI_Wait(&request_, MPI_STATUS_IGNORE), operation_);
  }
  bool test() override {
    int done = 0;
    check(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), operation_);
    return done != 0;
  }

 private:
  MPI_Request request_;
  const char* operation_;
  const std::string& group_;  // the MpiComm's, which outlives its requests
};

class MpiComm final : public Comm {
 public:
  MpiComm(MPI_Comm comm, const std::string& name) {
    check(MPI_Comm_dup(comm, &comm_), "Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    group_ = describe_group(comm_, name);
  }
  ~MpiComm() override { MPI_Comm_free(&comm_); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(float* data, std::size_t count) override {
    const BlockedIn watched("all-reduce", group_);
    check(MPI_Allreduce(MPI_IN_PLACE, data, as_count(count), MPI_FLOAT, MPI_SUM, comm_), "Allreduce");
  }
  double all_reduce_sum(double value) override {
    const BlockedIn watched("all-reduce", group_);
    check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_SUM, comm_), "Allreduce");
    return value;
  }
  void queue_all_reduce_sum(double* data, std::size_t count) override {
    const BlockedIn watched("all-reduce", group_);
    check(MPI_Allreduce(MPI_IN_PLACE, data, as_count(count), MPI_DOUBLE, MPI_SUM, comm_), "Allreduce");
  }
  CommRequestPtr all_reduce_sum_async(float* data, std::size_t count) override {
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, data, as_count(count), MPI_FLOAT, MPI_SUM, comm_, &request), "Iallreduce");
    return std::make_unique<MpiRequest>(request, "non-blocking all-reduce", group_);
  }
  void all_gather(const float* send, float* recv, std::size_t count) override {
    gather(send, recv, count, MPI_FLOAT);
  }
  void all_gather(const std::uint16_t* send, std::uint16_t* recv, std::size_t count) override {
    gather(send, recv, count, MPI_UINT16_T);
  }
  void reduce_scatter_sum(const float* send, float* recv, std::size_t count) override {
    const BlockedIn watched("reduce-scatter", group_);
    check(MPI_Reduce_scatter_block(send, recv, as_count(count), MPI_FLOAT, MPI_SUM, comm_), "Reduce_scatter_block");
  }
  CommRequestPtr reduce_scatter_sum_async(const float* send, float* recv, std::size_t count) override {
    MPI_Request request;
    check(MPI_Ireduce_scatter_block(send, recv, as_count(count), MPI_FLOAT, MPI_SUM, comm_, &request),
          "Ireduce_scatter_block");
    return std::make_unique<MpiRequest>(request, "non-blocking reduce-scatter", group_);
  }
  void broadcast(float* data, std::size_t count, int root) override {
    const BlockedIn watched("broadcast", group_);
    check(MPI_Bcast(data, as_count(count), MPI_FLOAT, root, comm_), "Bcast");
  }
  CommRequestPtr send_async(const float* data, std::size_t count, int peer, int tag) override {
    MPI_Request request;
    check(MPI_Isend(data, as_count(count), MPI_FLOAT, peer, tag, comm_, &request), "Isend");
    return std::make_unique<MpiRequest>(request, "send", group_);
  }
  CommRequestPtr recv_async(float* data, std::size_t count, int peer, int tag) override {
    MPI_Request request;
    check(MPI_Irecv(data, as_count(count), MPI_FLOAT, peer, tag, comm_, &request), "Irecv");
    return std::make_unique<MpiRequest>(request, "receive", group_);
  }
  void all_to_all_v(const float* send, const std::vector<std::size_t>& send_counts, float* recv,
                    const std::vector<std::size_t>& recv_counts) override {
    const BlockedIn watched("all-to-all", group_);
    std::vector<int> counts(4 * static_cast<std::size_t>(size_));  // send counts, displacements; receive's
    int* send_count = counts.data();
    int* send_at = send_count + size_;
    int* recv_count = send_at + size_;
    int* recv_at = recv_count + size_;
    std::size_t sent = 0, received = 0;
    for (int peer = 0; peer < size_; ++peer) {
      send_count[peer] = as_count(send_counts[peer]), send_at[peer] = as_count(sent);
      recv_count[peer] = as_count(recv_counts[peer]), recv_at[peer] = as_count(received);
      sent += send_counts[peer], received += recv_counts[peer];
    }
    check(MPI_Alltoallv(send, send_count, send_at, MPI_FLOAT, recv, recv_count, recv_at, MPI_FLOAT, comm_),
          "Alltoallv");
  }

 private:
  template <class T>
  void gather(const T* send, T* recv, std::size_t count, MPI_Datatype type) {
    const BlockedIn watched("all-gather", group_);
    const void* source = send == recv + rank_ * count ? MPI_IN_PLACE : send;
    check(MPI_Allgather(source, as_count(count), type, recv, as_count(count), type, comm_), "Allgather");
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::string group_;
};

}  // namespace

std::string describe_group(MPI_Comm comm, const std::string& name) {
  MPI_Group group, world;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int size = 0;
  MPI_Group_size(group, &size);
  std::vector<int> ranks(static_cast<std::size_t>(size)), world_ranks(ranks.size());
  std::iota(ranks.begin(), ranks.end(), 0);
  MPI_Group_translate_ranks(group, size, ranks.data(), world, world_ranks.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  const std::vector<std::string> hosts = hosts_of_ranks(comm);
  const bool one_host = std::all_of(hosts.begin(), hosts.end(), [&](const std::string& h) { return h == hosts[0]; });
  constexpr int kListed = 8;
  std::string text = "the " + name + " group (world rank" + (size > 1 ? "s " : " ");
  for (int i = 0; i < std::min(size, kListed); ++i)
    text += (i > 0 ? ", " : "") + std::to_string(world_ranks[i]) + (one_host ? "" : " on " + hosts[i]);
  if (size > kListed) text += ", ... (" + std::to_string(size) + " ranks)";
  return text + (one_host ? " on " + hosts[0] : "") + ")";
}

std::vector<std::string> hosts_of_ranks(MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(host, &length);
  std::vector<char> names(static_cast<std::size_t>(size) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm);
  std::vector<std::string> hosts;
  for (int rank = 0; rank < size; ++rank) hosts.emplace_back(&names[rank * MPI_MAX_PROCESSOR_NAME]);
  return hosts;
}

std::unique_ptr<Comm> make_mpi_comm(MPI_Comm comm, const std::string& name) {
  return std::make_unique<MpiComm>(comm, name);
}

}  // namespace trident
