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
  // rank's columns. Returns Σ losses. Collective over tp.
  double operator()(float* logits, float* losses, const int* targets);

 private:
  int rows_;
  TpShape shape_;
  Comm* tp_;
  FloatBuffer stats_;      // [3, rows]: this rank's
  FloatBuffer all_stats_;  // [tp, 3, rows]: every rank's
};

}  // namespace trident
