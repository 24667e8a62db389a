// The token ids of a step's micro-batches on this rank, in one device buffer that one copy fills:
// one wait for the device per step, where a copy per micro-batch and tensor waited twice per
// micro-batch. Micro-batch j's ids are inputs[j] and targets[j], views into that buffer, so the
// model reads them in place. Where positions are not simply 0..T−1, the buffer also holds each
// input token's position id, positions[j] (kernels/document_mask.hpp), computed on the host as the
// windows are read: under packed documents (data.document_mask) positions restart at each document,
// whose starts the buffer holds too (with the host copy the attention kernel's tile choice reads);
// under context parallelism each rank keeps its two chunks of every sequence, with their positions
// in the whole sequence.
#pragma once

#include <cstdint>
#include <vector>

#include "data/batch_windows.hpp"
#include "kernels/device.hpp"
#include "kernels/document_mask.hpp"

namespace trident {

class StepTokens {
 public:
  // eod_token: the end-of-document token of packed documents, or −1 (none). `chunks`: this rank's
  // share of each sequence of seq_len tokens (all of it without context parallelism).
  StepTokens(int microbatches, int micro_batch_size, int seq_len, std::int32_t eod_token, ContextChunks chunks,
             const char* name);

  // The windows of `step` (or validation batch) that this dp rank reads, copied to the device.
  void load(const BatchWindows& windows, int step, int dp_rank);

  std::vector<IntBuffer> inputs, targets;  // per micro-batch: B · T/cp ids each
  std::vector<TokenPositions> positions;   // per micro-batch, or empty (positions t, no documents)

 private:
  enum Part { kInputs, kTargets, kPositions, kStarts };
  std::int32_t* host_part(std::size_t microbatch, Part part) {
    return host_.data() + (parts_ * microbatch + part) * local_ids_;
  }
  // This rank's rows of sequence b of the whole windows in `whole_`, into micro-batch j's parts.
  void keep_rows(std::size_t j, int b);

  int seq_len_, local_len_;
  std::int32_t eod_token_;
  ContextChunks chunks_;
  std::size_t parts_;      // inputs, targets (and position ids, and document starts) per micro-batch
  std::size_t local_ids_;  // B · T/cp
  IntBuffer all_;          // per micro-batch: its parts, one after the other
  HostIntBuffer host_;     // a separate copy even where host = device, so that the copy is one everywhere
  std::vector<std::int32_t> whole_inputs_, whole_targets_, whole_starts_;  // one micro-batch's whole windows
};

}  // namespace trident
