// Which tokens every rank trains on, exactly as DESIGN.md "Parallel semantics" fixes it:
// the stream is cut into N = floor((tokens - 1) / T) windows of T inputs (and the same T tokens
// shifted by one as targets). Step s (1-based) uses the global batch of G = mbs * m * dp
// sequences j = 0..G-1, sequence j reading the window that WindowOrder gives sequence
// (s - 1) * G + j of the run (in order: window ((s - 1) * G + j) mod N); sequence j belongs to
// dp rank floor(j / (mbs * m)) and, there, to micro-batch floor((j mod (mbs * m)) / mbs).
// The mapping depends on G only, so every grid with the same global batch sees the same data.
#pragma once

#include <cstdint>

#include "data/token_stream.hpp"
#include "data/window_order.hpp"

namespace trident {

class BatchWindows {
 public:
  // Throws InputError naming model.seq_len when the stream is shorter than one window (T + 1).
  // `shuffle` and `seed`: data.shuffle and train.seed (see WindowOrder).
  BatchWindows(TokenStream stream, int seq_len, int micro_batch_size, int microbatches, int dp, bool shuffle = false,
               std::uint64_t seed = 0);

  // Writes micro_batch_size * seq_len ids to each of `inputs` and `targets` (row-major
  // [micro_batch_size, seq_len]) for micro-batch `microbatch` of dp rank `dp_rank` at `step`.
  void fill(int step, int dp_rank, int microbatch, std::int32_t* inputs, std::int32_t* targets) const;

  std::int64_t windows() const { return windows_; }
  std::int64_t global_batch_sequences() const { return global_batch_; }
  // The epoch step `step`'s first sequence falls in (0-based).
  std::int64_t epoch_of_step(int step) const { return order_.epoch((step - 1) * global_batch_); }
  bool shuffled() const { return order_.shuffled(); }
  const TokenStream& stream() const { return stream_; }

 private:
  TokenStream stream_;
  int seq_len_;
  int micro_batch_size_;
  int microbatches_;
  int dp_;
  std::int64_t windows_;
  std::int64_t global_batch_;
  WindowOrder order_;
};

}  // namespace trident
