#include "pipeline/slowed_stage.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/error.hpp"
#include "pipeline/emulated_stage.hpp"

namespace trident {

std::optional<double> test_slowdown_for(int world_rank) {
  const char* setting = std::getenv("TRIDENT_TEST_SLOW_RANK");
  if (setting == nullptr || *setting == '\0') return std::nullopt;
  int rank = -1;
  double factor = 0;
  char tail = 0;
  if (std::sscanf(setting, "%d:%lf%c", &rank, &factor, &tail) != 2 || rank < 0 || !(factor >= 1.0))
    throw InputError(std::string("TRIDENT_TEST_SLOW_RANK = \"") + setting +
                     "\": expected RANK:FACTOR, a world rank and a factor >= 1 (\"3:1.5\")");
  if (rank != world_rank) return std::nullopt;
  return factor;
}

SlowedStage::SlowedStage(std::unique_ptr<StageCompute> inner, double factor)
    : inner_(std::move(inner)), factor_(factor) {}

template <class Action>
void SlowedStage::slowed(const Action& action) {
  inner_->progress = progress;  // the executor sets it on this object
  const auto start = std::chrono::steady_clock::now();
  action(*inner_);
  const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
  sleep_advancing_messages((factor_ - 1.0) * took.count(), progress);
}

void SlowedStage::forward(int chunk, int microbatch, const float* input, float* output) {
  slowed([&](StageCompute& inner) { inner.forward(chunk, microbatch, input, output); });
}

void SlowedStage::backward(int chunk, int microbatch, const float* output_grad, float* input_grad,
                           WeightGrads weight_grads, bool last_for_chunk) {
  slowed([&](StageCompute& inner) {
    inner.backward(chunk, microbatch, output_grad, input_grad, weight_grads, last_for_chunk);
  });
}

void SlowedStage::weight_grad(int chunk, int microbatch, bool last_for_chunk) {
  slowed([&](StageCompute& inner) { inner.weight_grad(chunk, microbatch, last_for_chunk); });
}

}  // namespace trident
