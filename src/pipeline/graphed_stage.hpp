// train.cuda_graph: every action of this rank (F, B, I or W of one chunk and micro-batch) recorded
// once as a device graph (kernels/device_graph.hpp) and replayed in the steps after, one launch in
// place of the action's hundreds. An action first runs as it is (step 1: what it allocates lazily,
// cuBLASLt's algorithms, Kokkos' scratch, is allocated outside any capture), is recorded the second
// time it comes (and run by its graph), and replayed from then on. A replay runs none of the
// action's host code, so the model's host-side bookkeeping (its stash slots, deferred gradients)
// stays as the recording step left it: balanced at a step's end, and every step the same actions in
// the same buffers. Host code run after replays began (an action without a graph) would break
// that and is refused.
#pragma once

#include <compare>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>

#include "pipeline/stage_compute.hpp"

namespace trident {

class GraphedStage : public StageCompute {
 public:
  // Records an action's work (and runs it once); returns what replays it. The GPU build's
  // DeviceGraph by default; tests give their own.
  using Recorder = std::function<std::function<void()>(const std::function<void()>& work)>;
  static std::function<void()> record_device_graph(const std::function<void()>& work);

  explicit GraphedStage(std::unique_ptr<StageCompute> inner, Recorder record = record_device_graph);

  void forward(int chunk, int microbatch, const float* input, float* output) override;
  void backward(int chunk, int microbatch, const float* output_grad, float* input_grad, WeightGrads weight_grads,
                bool last_for_chunk) override;
  void weight_grad(int chunk, int microbatch, bool last_for_chunk) override;
  void take_loss_sum(double* total) override { inner_->take_loss_sum(total); }

  std::size_t recorded() const { return recorded_; }
  std::size_t replayed() const { return replayed_; }

 private:
  // What an action's kernels are launched with: its kind, place, buffers and flags.
  struct Action {
    char kind;  // 'F', 'B', 'I' or 'W'
    int chunk, microbatch;
    const void* input;
    const void* output;
    bool last_for_chunk;
    auto operator<=>(const Action&) const = default;
  };
  struct Entry {
    bool ran_once = false;
    std::function<void()> replay;
  };
  void run(const Action& action, const std::function<void()>& work);

  std::unique_ptr<StageCompute> inner_;
  Recorder record_;
  std::map<Action, Entry> actions_;
  std::size_t recorded_ = 0, replayed_ = 0;
};

}  // namespace trident
