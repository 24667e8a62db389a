#include "train/step_tokens.hpp"

#include <string>
#include <utility>

namespace trident {

StepTokens::StepTokens(int microbatches, int micro_batch_size, int seq_len, std::int32_t eod_token,
                       const char* name)
    : seq_len_(seq_len),
      eod_token_(eod_token),
      parts_(eod_token >= 0 ? 3 : 2),
      ids_(static_cast<std::size_t>(micro_batch_size) * seq_len),
      all_(std::string(name), parts_ * microbatches * ids_),
      host_(Kokkos::create_mirror(all_)) {
  auto part = [&](int j, int index) {
    const std::size_t first = (parts_ * j + index) * ids_;
    return IntBuffer(Kokkos::subview(all_, std::pair(first, first + ids_)));
  };
  for (int j = 0; j < microbatches; ++j) {
    inputs.push_back(part(j, 0));
    targets.push_back(part(j, 1));
    if (eod_token >= 0) documents.push_back({part(j, 2).data(), host_ids(j, 2)});
  }
}

void StepTokens::load(const BatchWindows& windows, int step, int dp_rank) {
  for (std::size_t j = 0; j < inputs.size(); ++j) {
    std::int32_t* ids = host_ids(j, 0);
    windows.fill(step, dp_rank, static_cast<int>(j), ids, host_ids(j, 1));
    if (documents.empty()) continue;
    for (std::size_t sequence = 0; sequence < ids_ / static_cast<std::size_t>(seq_len_); ++sequence)
      document_starts(ids + sequence * seq_len_, seq_len_, eod_token_, host_ids(j, 2) + sequence * seq_len_);
  }
  Kokkos::deep_copy(all_, host_);
}

}  // namespace trident
