// [emulate]: every action sleeps for the deck's time instead of computing, while the executor's
// messages stay real, so schedules can be studied at 16+ ranks on a small machine and compared
// with the simulator. The loss is 0 and no gradient changes.
#pragma once

#include <vector>

#include "deck/config.hpp"
#include "pipeline/stage_compute.hpp"

namespace trident {

// Sleeps `milliseconds`, calling `progress` (when set) every 5 ms so that messages in flight advance.
void sleep_advancing_messages(double milliseconds, const std::function<void()>& progress);

class EmulatedStage : public StageCompute {
 public:
  // `chunk_scales`: each chunk's times over the deck's (its layers over those the deck gives it).
  EmulatedStage(const EmulateConfig& times, std::vector<double> chunk_scales);

  void forward(int chunk, int microbatch, const float* input, float* output) override;
  void backward(int chunk, int microbatch, const float* output_grad, float* input_grad, WeightGrads weight_grads,
                bool last_for_chunk) override;
  void weight_grad(int chunk, int microbatch, bool last_for_chunk) override;
  void take_loss_sum(double* total) override;

 private:
  void take_ms(int chunk, double milliseconds) const;

  EmulateConfig times_;
  std::vector<double> chunk_scales_;
};

}  // namespace trident
