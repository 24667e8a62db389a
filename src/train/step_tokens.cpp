#include "train/step_tokens.hpp"

#include <string>
#include <utility>

namespace trident {

StepTokens::StepTokens(int microbatches, int micro_batch_size, int seq_len, std::int32_t eod_token,
                       ContextChunks chunks, const char* name)
    : seq_len_(seq_len),
      local_len_(seq_len / chunks.size),
      eod_token_(eod_token),
      chunks_(chunks),
      parts_(eod_token >= 0 ? 4 : chunks.size > 1 ? 3 : 2),
      local_ids_(static_cast<std::size_t>(micro_batch_size) * local_len_),
      all_(std::string(name), parts_ * microbatches * local_ids_),
      host_(Kokkos::create_mirror(all_)),
      whole_inputs_(static_cast<std::size_t>(micro_batch_size) * seq_len),
      whole_targets_(whole_inputs_.size()),
      whole_starts_(whole_inputs_.size(), 0) {
  auto part = [&](int j, Part index) {
    const std::size_t first = (parts_ * j + index) * local_ids_;
    return IntBuffer(Kokkos::subview(all_, std::pair(first, first + local_ids_)));
  };
  for (int j = 0; j < microbatches; ++j) {
    inputs.push_back(part(j, kInputs));
    targets.push_back(part(j, kTargets));
    if (parts_ == 2) continue;
    TokenPositions& at = positions.emplace_back();
    at.ids = part(j, kPositions).data();
    if (eod_token >= 0) at.documents = {part(j, kStarts).data(), host_part(j, kStarts)};
  }
}

void StepTokens::keep_rows(std::size_t j, int b) {
  const std::size_t whole = static_cast<std::size_t>(b) * seq_len_, local = static_cast<std::size_t>(b) * local_len_;
  const int L = local_len_ / 2;
  for (int row = 0; row < local_len_; ++row) {
    const int t = chunks_.size > 1 ? chunks_.position(row, L) : row;
    host_part(j, kInputs)[local + row] = whole_inputs_[whole + t];
    host_part(j, kTargets)[local + row] = whole_targets_[whole + t];
    if (parts_ > 2) host_part(j, kPositions)[local + row] = t - whole_starts_[whole + t];
    if (parts_ > 3) host_part(j, kStarts)[local + row] = whole_starts_[whole + t];
  }
}

void StepTokens::load(const BatchWindows& windows, int step, int dp_rank) {
  const int sequences = static_cast<int>(whole_inputs_.size()) / seq_len_;
  for (std::size_t j = 0; j < inputs.size(); ++j) {
    windows.fill(step, dp_rank, static_cast<int>(j), whole_inputs_.data(), whole_targets_.data());
    for (int b = 0; b < sequences && eod_token_ >= 0; ++b)
      document_starts(whole_inputs_.data() + b * seq_len_, seq_len_, eod_token_, whole_starts_.data() + b * seq_len_);
    for (int b = 0; b < sequences; ++b) keep_rows(j, b);
  }
  Kokkos::deep_copy(all_, host_);
}

}  // namespace trident
