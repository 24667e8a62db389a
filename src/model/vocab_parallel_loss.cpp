#include "model/vocab_parallel_loss.hpp"

#include <string>

#include "kernels/cross_entropy.hpp"
#include "kernels/profile.hpp"

namespace trident {

VocabParallelLoss::VocabParallelLoss(int rows, const TpShape& shape, Comm& tp)
    : rows_(rows),
      shape_(shape),
      tp_(&tp),
      stats_(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("loss_stats")), 3 * rows),
      all_stats_(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("loss_all_stats")),
                 tp.size() * stats_.size()),
      sums_(std::string("loss_sums"), 64),
      uncounted_(std::string("uncounted_loss_sum")) {}

void VocabParallelLoss::operator()(float* logits, float* losses, const int* targets, bool counted) {
  const int ld = shape_.vocab_rows, columns = shape_.vocab_real, first = shape_.vocab_first;
  if (counted && calls_ == static_cast<int>(sums_.extent(0))) Kokkos::resize(sums_, 2 * sums_.extent(0));
  double* sum = counted ? sums_.data() + calls_++ : uncounted_.data();
  // One rank holds the whole vocabulary: the fused kernel finishes each row while it is in cache.
  if (tp_->size() == 1) return softmax_cross_entropy(logits, losses, targets, rows_, columns, sum);
  softmax_shard_statistics(logits, stats_.data(), targets, rows_, columns, ld, first);
  tp_->all_gather(stats_.data(), all_stats_.data(), stats_.size());
  softmax_shard_finish(logits, losses, all_stats_.data(), tp_->size(), tp_->rank(), targets, rows_, columns, ld, first,
                       sum);
}

// Every slot is read and cleared, not the first calls_: a replayed CUDA graph
// (pipeline/graphed_stage.hpp) writes its calls' slots without running operator()'s host code, so
// calls_ does not count them. A slot no call wrote holds 0 and adds nothing.
void VocabParallelLoss::take_sum(double* total) {
  const auto sums = sums_;
  const int slots = static_cast<int>(sums_.extent(0));
  declare_kernel_cost({8.0 * (2 * slots + 1), static_cast<double>(slots)});
  Kokkos::parallel_for("loss_sum", Kokkos::RangePolicy<ExecSpace>(0, 1), KOKKOS_LAMBDA(int) {
    double sum = 0.0;
    for (int slot = 0; slot < slots; ++slot) {
      sum += sums(slot);
      sums(slot) = 0.0;
    }
    *total = sum;
  });
  calls_ = 0;
}

}  // namespace trident
