// A request for NCCL work queued on a stream: an event recorded after it; test() polls the event
// (so a waiting caller can time out: the executor's watchdog). wait() makes the consumer stream
// (the compute stream, whose kernels read the result) wait for the event, without the host
// waiting; without a consumer it blocks the host, watched as MpiComm's waits are
// (common/watchdog.hpp: after schedule.timeout_s the job ends naming the operation and the group).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "comm/comm.hpp"
#include "common/watchdog.hpp"
#include "gpu/cuda_check.hpp"
#include "kernels/profile.hpp"

namespace trident {

class NcclRequest final : public CommRequest {
 public:
  // `operation` a literal, `group` as describe_group words it; both must outlive the request.
  NcclRequest(cudaStream_t stream, const char* operation, const std::string& group, cudaStream_t consumer = nullptr)
      : operation_(operation), group_(group), consumer_(consumer) {
    TRIDENT_GPU_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    TRIDENT_GPU_CHECK(cudaEventRecord(done_, stream));
  }
  ~NcclRequest() override { cudaEventDestroy(done_); }
  NcclRequest(const NcclRequest&) = delete;
  NcclRequest& operator=(const NcclRequest&) = delete;
  void wait() override {
    if (consumer_) {
      TRIDENT_GPU_CHECK(cudaStreamWaitEvent(consumer_, done_, 0));
      return;
    }
    const BlockedIn watched(operation_, group_);
    TRIDENT_GPU_CHECK(cudaEventSynchronize(done_));
    note_host_wait(operation_);
  }
  bool test() override {
    const cudaError_t status = cudaEventQuery(done_);
    if (status == cudaErrorNotReady) return false;
    TRIDENT_GPU_CHECK(status);
    return true;
  }

 private:
  cudaEvent_t done_ = nullptr;
  const char* operation_;
  const std::string& group_;
  cudaStream_t consumer_;
};

}  // namespace trident
