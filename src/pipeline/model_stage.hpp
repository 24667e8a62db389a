// The real computation behind the executor's actions: this rank's chunks of the model, in training
// or (forward only) in evaluation.
#pragma once

#include <vector>

#include "kernels/device.hpp"
#include "model/transformer.hpp"
#include "pipeline/stage_compute.hpp"

namespace trident {

class ModelStage : public StageCompute {
 public:
  // inputs[j] / targets[j]: micro-batch j's token ids, read by the chunk with the embedding and the
  // chunk with the head, and positions[j] its position ids and packed documents, read by every
  // chunk (empty: positions t, no documents);
  // the caller refills them before each step. grads_ready goes to the backward (or W) after which
  // a chunk's weight gradients are final (see Transformer::backward).
  ModelStage(Transformer& model, const std::vector<IntBuffer>& inputs, const std::vector<IntBuffer>& targets,
             const std::vector<TokenPositions>& positions, float loss_scale, Transformer::GradsReadyFn grads_ready);
  // Evaluation: forward passes only (a forward-only schedule), nothing kept for a backward.
  ModelStage(Transformer& model, const std::vector<IntBuffer>& inputs, const std::vector<IntBuffer>& targets,
             const std::vector<TokenPositions>& positions);

  void forward(int chunk, int microbatch, const float* input, float* output) override;
  void backward(int chunk, int microbatch, const float* output_grad, float* input_grad, WeightGrads weight_grads,
                bool last_for_chunk) override;
  void weight_grad(int chunk, int microbatch, bool last_for_chunk) override;
  void take_loss_sum(double* total) override;

 private:
  Transformer& model_;
  const std::vector<IntBuffer>& inputs_;
  const std::vector<IntBuffer>& targets_;
  const std::vector<TokenPositions>& positions_;
  float loss_scale_ = 0.0f;
  Transformer::GradsReadyFn grads_ready_;
  bool for_backward_ = true;
};

}  // namespace trident
