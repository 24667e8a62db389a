// The token ids of a step's micro-batches on this rank, in one device buffer that one copy fills:
// one wait for the device per step, where a copy per micro-batch and tensor waited twice per
// micro-batch. Micro-batch j's ids are inputs[j] and targets[j], views into that buffer, so the
// model reads them in place. Under packed documents (data.document_mask) the buffer also holds
// where each input token's document starts, documents[j], computed on the host as the windows are
// read (kernels/document_mask.hpp), with the host copy the attention kernel's tile choice reads.
#pragma once

#include <cstdint>
#include <vector>

#include "data/batch_windows.hpp"
#include "kernels/device.hpp"
#include "kernels/document_mask.hpp"

namespace trident {

class StepTokens {
 public:
  // eod_token: the end-of-document token of packed documents, or −1 (none: `documents` stays empty).
  StepTokens(int microbatches, int micro_batch_size, int seq_len, std::int32_t eod_token, const char* name);

  // The windows of `step` (or validation batch) that this dp rank reads, copied to the device.
  void load(const BatchWindows& windows, int step, int dp_rank);

  std::vector<IntBuffer> inputs, targets;  // per micro-batch: B·T ids each
  std::vector<DocumentMask> documents;     // per micro-batch: B·T document starts each, or empty

 private:
  std::int32_t* host_ids(std::size_t microbatch, int part) {
    return host_.data() + (parts_ * microbatch + part) * ids_;
  }

  int seq_len_;
  std::int32_t eod_token_;
  std::size_t parts_;   // inputs, targets (and document starts) per micro-batch
  std::size_t ids_;     // B·T
  IntBuffer all_;       // per micro-batch: its inputs, its targets (and its document starts)
  HostIntBuffer host_;  // a separate copy even where host = device, so that the copy is one everywhere
};

}  // namespace trident
