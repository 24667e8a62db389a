#include "model/vocab_parallel_loss.hpp"

#include <string>

#include "kernels/cross_entropy.hpp"

namespace trident {

VocabParallelLoss::VocabParallelLoss(int rows, const TpShape& shape, Comm& tp)
    : rows_(rows),
      shape_(shape),
      tp_(&tp),
      stats_(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("loss_stats")), 3 * rows),
      all_stats_(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("loss_all_stats")),
                 tp.size() * stats_.size()) {}

double VocabParallelLoss::operator()(float* logits, float* losses, const int* targets) {
  const int ld = shape_.vocab_rows, columns = shape_.vocab_real, first = shape_.vocab_first;
  // One rank holds the whole vocabulary: the fused kernel finishes each row while it is in cache.
  if (tp_->size() == 1) return softmax_cross_entropy(logits, losses, targets, rows_, columns);
  softmax_shard_statistics(logits, stats_.data(), targets, rows_, columns, ld, first);
  tp_->all_gather(stats_.data(), all_stats_.data(), stats_.size());
  return softmax_shard_finish(logits, losses, all_stats_.data(), tp_->size(), tp_->rank(), targets, rows_, columns,
                              ld, first);
}

}  // namespace trident
