#include "pipeline/emulated_stage.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "kernels/copy.hpp"

namespace trident {

// Sleeping, not spinning: emulated ranks oversubscribe the cores, and a sleeping rank leaves its
// core to the others, so every rank's action takes its nominal time. The sleep is cut into slices
// between which the messages in flight advance, as a rank computing on a GPU would let them.
void sleep_advancing_messages(double milliseconds, const std::function<void()>& progress) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double, std::milli>(milliseconds));
  for (Clock::time_point now = Clock::now(); now < end; now = Clock::now()) {
    std::this_thread::sleep_until(std::min(end, now + std::chrono::milliseconds(5)));
    if (progress) progress();
  }
}

void EmulatedStage::take_ms(int chunk, double milliseconds) const {
  sleep_advancing_messages(milliseconds * chunk_scales_.at(static_cast<std::size_t>(chunk)), progress);
}

EmulatedStage::EmulatedStage(const EmulateConfig& times, std::vector<double> chunk_scales)
    : times_(times), chunk_scales_(std::move(chunk_scales)) {}

void EmulatedStage::forward(int chunk, int, const float*, float*) { take_ms(chunk, times_.forward_ms); }

void EmulatedStage::backward(int chunk, int, const float*, float*, WeightGrads weight_grads, bool) {
  take_ms(chunk, weight_grads == WeightGrads::now ? times_.backward_ms : times_.input_grad_ms);
}

void EmulatedStage::weight_grad(int chunk, int, bool) { take_ms(chunk, times_.weight_grad_ms); }

void EmulatedStage::take_loss_sum(double* total) { zero_doubles(total, 1); }

}  // namespace trident
