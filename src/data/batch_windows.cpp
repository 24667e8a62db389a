#include "data/batch_windows.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "common/error.hpp"

namespace trident {

namespace {

// The window count, or InputError when the stream cannot fill one window.
std::int64_t count_windows(const TokenStream& stream, int seq_len, int micro_batch_size, int microbatches, int dp) {
  if (seq_len < 1 || micro_batch_size < 1 || microbatches < 1 || dp < 1) {
    throw std::invalid_argument("BatchWindows: seq_len, micro_batch_size, microbatches and dp must be >= 1");
  }
  const std::int64_t tokens = stream.size();
  if (tokens < seq_len + 1) {
    throw InputError(stream.describe() + ": " + std::to_string(tokens) + " tokens are too few for one window of " +
                     "model.seq_len = " + std::to_string(seq_len) + " (needs seq_len + 1 = " +
                     std::to_string(seq_len + 1) + "); use more data or a smaller model.seq_len");
  }
  return (tokens - 1) / seq_len;
}

}  // namespace

BatchWindows::BatchWindows(TokenStream stream, int seq_len, int micro_batch_size, int microbatches, int dp,
                           bool shuffle, std::uint64_t seed)
    : stream_(std::move(stream)),
      seq_len_(seq_len),
      micro_batch_size_(micro_batch_size),
      microbatches_(microbatches),
      dp_(dp),
      windows_(count_windows(stream_, seq_len, micro_batch_size, microbatches, dp)),
      global_batch_(static_cast<std::int64_t>(micro_batch_size) * microbatches * dp),
      order_(windows_, shuffle, seed) {}

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
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(seq_len_) + 1);
  for (int row = 0; row < micro_batch_size_; ++row) {
    const std::int64_t window = order_.window((step - 1) * global_batch_ + first_sequence + row);
    stream_.read(window * seq_len_, seq_len_ + 1, tokens.data());
    std::copy(tokens.begin(), tokens.end() - 1, inputs + static_cast<std::ptrdiff_t>(row) * seq_len_);
    std::copy(tokens.begin() + 1, tokens.end(), targets + static_cast<std::ptrdiff_t>(row) * seq_len_);
  }
}

}  // namespace trident
