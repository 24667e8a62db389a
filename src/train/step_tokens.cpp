#include "train/step_tokens.hpp"

#include <string>
#include <utility>

namespace trident {

StepTokens::StepTokens(int microbatches, int micro_batch_size, int seq_len, const char* name)
    : all_(std::string(name), 2 * static_cast<std::size_t>(microbatches) * micro_batch_size * seq_len),
      host_(Kokkos::create_mirror(all_)),
      microbatch_ids_(static_cast<std::size_t>(micro_batch_size) * seq_len) {
  for (int j = 0; j < microbatches; ++j) {
    const std::size_t first = 2 * j * microbatch_ids_;
    inputs.emplace_back(Kokkos::subview(all_, std::pair(first, first + microbatch_ids_)));
    targets.emplace_back(Kokkos::subview(all_, std::pair(first + microbatch_ids_, first + 2 * microbatch_ids_)));
  }
}

void StepTokens::load(const BatchWindows& windows, int step, int dp_rank) {
  for (std::size_t j = 0; j < inputs.size(); ++j) {
    std::int32_t* ids = host_.data() + 2 * j * microbatch_ids_;
    windows.fill(step, dp_rank, static_cast<int>(j), ids, ids + microbatch_ids_);
  }
  Kokkos::deep_copy(all_, host_);
}

}  // namespace trident
