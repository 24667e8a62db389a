#include "pipeline/model_stage.hpp"

#include <utility>

namespace trident {

ModelStage::ModelStage(Transformer& model, const std::vector<IntBuffer>& inputs, const std::vector<IntBuffer>& targets,
                       const std::vector<TokenPositions>& positions, float loss_scale,
                       Transformer::GradsReadyFn grads_ready)
    : model_(model),
      inputs_(inputs),
      targets_(targets),
      positions_(positions),
      loss_scale_(loss_scale),
      grads_ready_(std::move(grads_ready)) {}

ModelStage::ModelStage(Transformer& model, const std::vector<IntBuffer>& inputs, const std::vector<IntBuffer>& targets,
                       const std::vector<TokenPositions>& positions)
    : model_(model), inputs_(inputs), targets_(targets), positions_(positions), for_backward_(false) {}

void ModelStage::forward(int chunk, int microbatch, const float* input, float* output) {
  const ModelChunk& spec = model_.chunks()[chunk];
  Transformer::ForwardIO io;
  if (spec.embedding) io.tokens = &inputs_.at(microbatch);
  if (spec.head) io.targets = &targets_.at(microbatch);
  if (!positions_.empty()) io.positions = positions_.at(microbatch);
  io.input = input;
  io.output = output;
  io.for_backward = for_backward_;
  model_.forward(chunk, microbatch, io);
}

void ModelStage::take_loss_sum(double* total) { model_.take_loss_sum(total); }

void ModelStage::backward(int chunk, int microbatch, const float* output_grad, float* input_grad,
                          WeightGrads weight_grads, bool last_for_chunk) {
  model_.backward(chunk, microbatch, loss_scale_, {output_grad, input_grad}, weight_grads,
                  last_for_chunk ? grads_ready_ : Transformer::GradsReadyFn{});
}

void ModelStage::weight_grad(int chunk, int microbatch, bool last_for_chunk) {
  model_.weight_grad(chunk, microbatch, last_for_chunk ? grads_ready_ : Transformer::GradsReadyFn{});
}

}  // namespace trident
