// What the executor asks of the work on one pipeline rank, action by action. The real model
// (model_stage.hpp) and the emulation that only sleeps (emulated_stage.hpp) implement it, so the
// executor, its messages and its timeline are the same in both.
#pragma once

#include <functional>

#include "model/transformer.hpp"

namespace trident {

class StageCompute {
 public:
  virtual ~StageCompute() = default;

  // F of `microbatch` on this rank's `chunk`. input: the previous virtual stage's output (null on
  // the first virtual stage, which reads tokens); output: where this chunk's output goes (null on
  // the last virtual stage). On the last virtual stage the micro-batch's loss sum stays on the
  // device for take_loss_sum().
  virtual void forward(int chunk, int microbatch, const float* input, float* output) = 0;
  // B (weight_grads = now) or I (deferred). output_grad: from the next virtual stage (null on the
  // last); input_grad: receives the gradient for the previous one (null on the first).
  // last_for_chunk: no later action of this step adds to this chunk's weight gradients.
  virtual void backward(int chunk, int microbatch, const float* output_grad, float* input_grad,
                        WeightGrads weight_grads, bool last_for_chunk) = 0;
  // W: the weight gradients I deferred.
  virtual void weight_grad(int chunk, int microbatch, bool last_for_chunk) = 0;
  // *total (one device double) = the loss sums of the forwards since the last take (0 off the last
  // virtual stage); queued, the host does not wait.
  virtual void take_loss_sum(double* total) = 0;

  // Set by the executor while it runs a step: advances the pipeline messages in flight. MPI moves
  // a large message only while both ranks call into it, so work that can pause (the emulation's
  // sleeps) calls this now and then; the model's kernels cannot, and its messages advance at
  // action boundaries and in its TP collectives.
  std::function<void()> progress;
};

}  // namespace trident
