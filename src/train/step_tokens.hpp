// The token ids of a step's micro-batches on this rank, in one device buffer that one copy fills:
// one wait for the device per step, where a copy per micro-batch and tensor waited twice per
// micro-batch. Micro-batch j's ids are inputs[j] and targets[j], views into that buffer, so the
// model reads them in place.
#pragma once

#include <vector>

#include "data/batch_windows.hpp"
#include "kernels/device.hpp"

namespace trident {

class StepTokens {
 public:
  StepTokens(int microbatches, int micro_batch_size, int seq_len, const char* name);

  // The windows of `step` (or validation batch) that this dp rank reads, copied to the device.
  void load(const BatchWindows& windows, int step, int dp_rank);

  std::vector<IntBuffer> inputs, targets;  // per micro-batch: B·T ids each

 private:
  IntBuffer all_;       // per micro-batch: its inputs, then its targets
  HostIntBuffer host_;  // a separate copy even where host = device, so that the copy is one everywhere
  std::size_t microbatch_ids_;  // B·T
};

}  // namespace trident
