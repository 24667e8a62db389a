#include "pipeline/emulated_stage.hpp"

#include <chrono>
#include <thread>

namespace trident {

namespace {

// Sleeping, not spinning: emulated ranks oversubscribe the cores, and a sleeping rank leaves its
// core to the others, so every rank's action takes its nominal time.
void take_ms(double milliseconds) {
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(milliseconds));
}

}  // namespace

EmulatedStage::EmulatedStage(const EmulateConfig& times) : times_(times) {}

double EmulatedStage::forward(int, int, const float*, float*) {
  take_ms(times_.forward_ms);
  return 0.0;
}

void EmulatedStage::backward(int, int, const float*, float*, WeightGrads weight_grads, bool) {
  take_ms(weight_grads == WeightGrads::now ? times_.backward_ms : times_.input_grad_ms);
}

void EmulatedStage::weight_grad(int, int, bool) { take_ms(times_.weight_grad_ms); }

}  // namespace trident
