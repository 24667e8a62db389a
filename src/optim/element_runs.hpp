// The parameters' elements as runs that one kernel launch walks together (the optimizer's update,
// the gradient norm's reduction), in the manner of Apex's multi_tensor_apply: each run lies within
// one tensor, so a per-tensor rule (AdamW's weight decay) holds for the whole run, and has at most
// kRunElements elements, so the runs spread evenly over the device. A run knows where it lies in the
// flat parameter buffer and in the buffers read alongside it (the gradients and AdamW's moments:
// the same offsets for a replicated optimizer, this rank's shard of them under ZeRO-1). Built once
// per store, on the host; the kernels read the table from device memory.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/device.hpp"
#include "model/param_store.hpp"

namespace trident {

struct ElementRun {
  std::size_t param = 0;  // first element in the flat parameter buffer
  std::size_t local = 0;  // first element in the buffers read alongside
  int count = 0;
  int decayed = 0;  // AdamW's weight decay applies (the run's tensor is a 2-D weight)
};

inline constexpr int kRunElements = 4096;

class ElementRuns {
 public:
  // Elements [offset, offset + count) of the flat parameter buffer, all of `tensor`, held at [local,
  // local + count) of the buffers read alongside; cut into runs of kRunElements from `offset` on.
  void add(const ParamTensor& tensor, std::size_t offset, std::size_t count, std::size_t local);
  // Copies the runs added so far to the device; call before a kernel reads device().
  void upload();

  std::size_t size() const { return host_.size(); }
  std::size_t elements() const { return elements_; }  // over all runs
  const std::vector<ElementRun>& host() const { return host_; }
  Kokkos::View<const ElementRun*, MemSpace> device() const { return device_; }

 private:
  std::vector<ElementRun> host_;
  std::size_t elements_ = 0;
  Kokkos::View<ElementRun*, MemSpace> device_;
};

// Every tensor of the store, whole, read alongside at its own offsets (uploaded).
ElementRuns whole_tensors(const ParamStore& params);

}  // namespace trident
