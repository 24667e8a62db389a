#include "comm/mpi_comm.hpp"

#include <climits>
#include <stdexcept>
#include <string>

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
  MpiRequest(MPI_Request request, const char* operation) : request_(request), operation_(operation) {}
  // A request must not outlive its buffers unfinished: complete it rather than leak it.
  ~MpiRequest() override {
    if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  void wait() override { check(MPI_Wait(&request_, MPI_STATUS_IGNORE), operation_); }
  bool test() override {
    int done = 0;
    check(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), operation_);
    return done != 0;
  }

 private:
  MPI_Request request_;
  const char* operation_;
};

class MpiComm final : public Comm {
 public:
  explicit MpiComm(MPI_Comm comm) {
    check(MPI_Comm_dup(comm, &comm_), "Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiComm() override { MPI_Comm_free(&comm_); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(float* data, std::size_t count) override {
    check(MPI_Allreduce(MPI_IN_PLACE, data, as_count(count), MPI_FLOAT, MPI_SUM, comm_), "Allreduce");
  }
  double all_reduce_sum(double value) override {
    check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_SUM, comm_), "Allreduce");
    return value;
  }
  CommRequestPtr all_reduce_sum_async(float* data, std::size_t count) override {
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, data, as_count(count), MPI_FLOAT, MPI_SUM, comm_, &request), "Iallreduce");
    return std::make_unique<MpiRequest>(request, "Iallreduce");
  }
  void all_gather(const float* send, float* recv, std::size_t count) override {
    const void* source = send == recv + rank_ * count ? MPI_IN_PLACE : send;
    check(MPI_Allgather(source, as_count(count), MPI_FLOAT, recv, as_count(count), MPI_FLOAT, comm_), "Allgather");
  }
  void reduce_scatter_sum(const float* send, float* recv, std::size_t count) override {
    check(MPI_Reduce_scatter_block(send, recv, as_count(count), MPI_FLOAT, MPI_SUM, comm_), "Reduce_scatter_block");
  }
  CommRequestPtr reduce_scatter_sum_async(const float* send, float* recv, std::size_t count) override {
    MPI_Request request;
    check(MPI_Ireduce_scatter_block(send, recv, as_count(count), MPI_FLOAT, MPI_SUM, comm_, &request),
          "Ireduce_scatter_block");
    return std::make_unique<MpiRequest>(request, "Ireduce_scatter_block");
  }
  void broadcast(float* data, std::size_t count, int root) override {
    check(MPI_Bcast(data, as_count(count), MPI_FLOAT, root, comm_), "Bcast");
  }
  CommRequestPtr send_async(const float* data, std::size_t count, int peer, int tag) override {
    MPI_Request request;
    check(MPI_Isend(data, as_count(count), MPI_FLOAT, peer, tag, comm_, &request), "Isend");
    return std::make_unique<MpiRequest>(request, "Isend");
  }
  CommRequestPtr recv_async(float* data, std::size_t count, int peer, int tag) override {
    MPI_Request request;
    check(MPI_Irecv(data, as_count(count), MPI_FLOAT, peer, tag, comm_, &request), "Irecv");
    return std::make_unique<MpiRequest>(request, "Irecv");
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm(MPI_Comm comm) { return std::make_unique<MpiComm>(comm); }

}  // namespace trident
