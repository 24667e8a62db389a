#include "pipeline/graphed_stage.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/device_graph.hpp"

namespace trident {

std::function<void()> GraphedStage::record_device_graph(const std::function<void()>& work) {
  auto graph = std::make_shared<DeviceGraph>(work);
  return [graph] { graph->launch(); };
}

GraphedStage::GraphedStage(std::unique_ptr<StageCompute> inner, Recorder record)
    : inner_(std::move(inner)), record_(std::move(record)) {}

void GraphedStage::run(const Action& action, const std::function<void()>& work) {
  inner_->progress = progress;  // the executor sets it on this object
  Entry& entry = actions_[action];
  if (entry.replay) {
    entry.replay();
    ++replayed_;
  } else if (replayed_ > 0) {
    throw std::logic_error(std::string("train.cuda_graph: action ") + action.kind + " of chunk " +
                           std::to_string(action.chunk) + ", micro-batch " + std::to_string(action.microbatch) +
                           " has no graph, and replays have begun; every step must repeat the same actions");
  } else if (entry.ran_once) {
    entry.replay = record_(work);
    ++recorded_;
  } else {
    work();
    entry.ran_once = true;
  }
}

void GraphedStage::forward(int chunk, int microbatch, const float* input, float* output) {
  run({'F', chunk, microbatch, input, output, false},
      [=, this] { inner_->forward(chunk, microbatch, input, output); });
}

void GraphedStage::backward(int chunk, int microbatch, const float* output_grad, float* input_grad,
                            WeightGrads weight_grads, bool last_for_chunk) {
  run({weight_grads == WeightGrads::now ? 'B' : 'I', chunk, microbatch, output_grad, input_grad, last_for_chunk},
      [=, this] { inner_->backward(chunk, microbatch, output_grad, input_grad, weight_grads, last_for_chunk); });
}

void GraphedStage::weight_grad(int chunk, int microbatch, bool last_for_chunk) {
  run({'W', chunk, microbatch, nullptr, nullptr, last_for_chunk},
      [=, this] { inner_->weight_grad(chunk, microbatch, last_for_chunk); });
}

}  // namespace trident
