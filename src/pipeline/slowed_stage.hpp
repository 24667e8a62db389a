// A rank made slower on purpose, for the tests of straggler detection (trident-post stragglers):
// TRIDENT_TEST_SLOW_RANK="R:F" makes world rank R's every F, B, I and W action take F times as long
// (the action, then a sleep of (F − 1) times its duration, during which messages advance). Test-only,
// documented in DESIGN.md; on the GPU build the sleep follows the kernels' launch, not their end.
#pragma once

#include <memory>
#include <optional>

#include "pipeline/stage_compute.hpp"

namespace trident {

// The factor TRIDENT_TEST_SLOW_RANK gives `world_rank`, if it names that rank. A malformed value
// throws InputError naming the variable and the form it takes.
std::optional<double> test_slowdown_for(int world_rank);

class SlowedStage : public StageCompute {
 public:
  SlowedStage(std::unique_ptr<StageCompute> inner, double factor);

  void forward(int chunk, int microbatch, const float* input, float* output) override;
  void backward(int chunk, int microbatch, const float* output_grad, float* input_grad, WeightGrads weight_grads,
                bool last_for_chunk) override;
  void weight_grad(int chunk, int microbatch, bool last_for_chunk) override;
  void take_loss_sum(double* total) override { inner_->take_loss_sum(total); }

 private:
  template <class Action>
  void slowed(const Action& action);

  std::unique_ptr<StageCompute> inner_;
  double factor_;
};

}  // namespace trident
