#include "data/batch_windows.hpp"

#include <algorithm>
#include <stdexcept>

#include "common/error.hpp"

namespace trident {

BatchWindows::BatchWindows(TokenStream stream, int seq_len, int micro_batch_size, int microbatches, int dp)
    : stream_(std::move(stream)),
      seq_len_(seq_len),
      micro_batch_size_(micro_batch_size),
      microbatches_(microbatches),
      dp_(dp) {
  if (seq_len < 1 || micro_batch_size < 1 || microbatches < 1 || dp < 1) {
    throw std::invalid_argument("BatchWindows: seq_len, micro_batch_size, microbatches and dp must be >= 1");
  }
  const auto tokens = static_cast<std::int64_t>(stream_.tokens.size());
  if (tokens < seq_len + 1) {
    throw InputError(stream_.source + ": " + std::to_string(tokens) + " tokens are too few for one window of " +
                     "model.seq_len = " + std::to_string(seq_len) + " (needs seq_len + 1 = " +
                     std::to_string(seq_len + 1) + "); use more data or a smaller model.seq_len");
  }
  windows_ = (tokens - 1) / seq_len;
  global_batch_ = static_cast<std::int64_t>(micro_batch_size) * microbatches * dp;
}

void BatchWindows::fill(int step, int dp_rank, int microbatch, std::int32_t* inputs, std::int32_t* targets) const {
  if (step < 1 || dp_rank < 0 || dp_rank >= dp_ || microbatch < 0 || microbatch >= microbatches_) {
    throw std::out_of_range("BatchWindows::fill: step " + std::to_string(step) + ", dp rank " +
                            std::to_string(dp_rank) + ", micro-batch " + std::to_string(microbatch) +
                            " outside step >= 1, dp < " + std::to_string(dp_) + ", micro-batches < " +
                            std::to_string(microbatches_));
  }
  const std::int64_t first_sequence =
      static_cast<std::int64_t>(dp_rank) * micro_batch_size_ * microbatches_ +
      static_cast<std::int64_t>(microbatch) * micro_batch_size_;
  for (int row = 0; row < micro_batch_size_; ++row) {
    const std::int64_t j = first_sequence + row;
    const std::int64_t window = ((step - 1) * global_batch_ + j) % windows_;
    const std::int32_t* start = stream_.tokens.data() + window * seq_len_;
    std::copy(start, start + seq_len_, inputs + static_cast<std::ptrdiff_t>(row) * seq_len_);
    std::copy(start + 1, start + 1 + seq_len_, targets + static_cast<std::ptrdiff_t>(row) * seq_len_);
  }
}

}  // namespace trident
