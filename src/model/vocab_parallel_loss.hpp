// Cross-entropy of the tied head's logits when the vocabulary is split across the TP group
// (Megatron's vocab-parallel cross-entropy): each rank holds the logits of its vocab ids only.
// The softmax needs every row's max and sum of exponentials over the whole vocabulary; the ranks
// exchange those per-row statistics (one all-gather of 3 floats per row) instead of any logits.
#pragma once

#include "comm/comm.hpp"
#include "kernels/device.hpp"
#include "model/tp_shape.hpp"

namespace trident {

class VocabParallelLoss {
 public:
  // rows: logit rows per call; `tp` must outlive this object.
  VocabParallelLoss(int rows, const TpShape& shape, Comm& tp);

  // logits [rows, shape.vocab_rows]: this rank's columns; only the first shape.vocab_real of each
  // row are read and written (the rest is padding). Same contract as softmax_cross_entropy:
  // losses[r] (identical on every rank) and logits become softmax − onehot(target) for this
  // rank's columns. Σ losses stays on the device, kept for take_sum() unless `counted` is false (a
  // recomputed forward's). Collective over tp.
  void operator()(float* logits, float* losses, const int* targets, bool counted = true);

  // *total (one device double) = the Σ losses of every call since the last take, added in call
  // order (the same sum whatever the timing); starts a new count. Queued: the host does not wait.
  void take_sum(double* total);

 private:
  int rows_;
  TpShape shape_;
  Comm* tp_;
  FloatBuffer stats_;      // [3, rows]: this rank's
  FloatBuffer all_stats_;  // [tp, 3, rows]: every rank's
  // One per counted call since the last take, in call order, 0 where none wrote; grows, never shrinks.
  Kokkos::View<double*, MemSpace> sums_;
  int calls_ = 0;  // counted calls since the last take whose host code ran: the next call's slot
  Kokkos::View<double, MemSpace> uncounted_;  // where an uncounted call's sum goes
};

}  // namespace trident
