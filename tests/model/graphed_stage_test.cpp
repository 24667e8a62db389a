// train.cuda_graph (pipeline/graphed_stage.hpp): each action runs once as it is, is recorded the
// second time, and is replayed after that; on the GPU build the replayed steps of a real model
// train as the same steps run directly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/device_graph.hpp"
#include "model_test_support.hpp"
#include "pipeline/graphed_stage.hpp"
#include "pipeline/model_stage.hpp"

namespace trident {
namespace {

using namespace testing;

// Writes down every action that reaches the model.
struct ListedStage : StageCompute {
  std::vector<std::string> calls;
  void forward(int, int microbatch, const float*, float*) override { note('F', microbatch); }
  void backward(int, int microbatch, const float*, float*, WeightGrads, bool) override { note('B', microbatch); }
  void weight_grad(int, int microbatch, bool) override { note('W', microbatch); }
  void take_loss_sum(double*) override {}
  void note(char kind, int microbatch) { calls.push_back(std::to_string(microbatch).insert(0, 1, kind)); }
};

// Records as a graph does (the work runs once as it is captured) and counts the replays.
struct CountingRecorder {
  int replays = 0;
  GraphedStage::Recorder recorder() {
    return [this](const std::function<void()>& work) {
      work();
      return std::function<void()>([this] { ++replays; });
    };
  }
};

void one_step(StageCompute& stage) {
  stage.forward(0, 0, nullptr, nullptr);
  stage.forward(0, 1, nullptr, nullptr);
  stage.backward(0, 1, nullptr, nullptr, WeightGrads::deferred, false);
  stage.weight_grad(0, 1, false);
  stage.backward(0, 0, nullptr, nullptr, WeightGrads::now, true);
}

TEST(GraphedStage, RunsEachActionThenRecordsItThenReplaysIt) {
  auto model = std::make_unique<ListedStage>();
  ListedStage& listed = *model;
  CountingRecorder counting;
  GraphedStage stage(std::move(model), counting.recorder());
  const std::vector<std::string> step = {"F0", "F1", "B1", "W1", "B0"};

  one_step(stage);
  EXPECT_EQ(listed.calls, step);
  EXPECT_EQ(stage.recorded(), 0u);

  one_step(stage);
  std::vector<std::string> twice = step;
  twice.insert(twice.end(), step.begin(), step.end());
  EXPECT_EQ(listed.calls, twice);
  EXPECT_EQ(stage.recorded(), 5u);
  EXPECT_EQ(counting.replays, 0);

  for (int s = 0; s < 3; ++s) one_step(stage);
  EXPECT_EQ(listed.calls, twice) << "a replay runs none of the action's host code";
  EXPECT_EQ(counting.replays, 15);
  EXPECT_EQ(stage.replayed(), 15u);
}

TEST(GraphedStage, RefusesAnActionWithoutAGraphOnceReplaysBegan) {
  CountingRecorder counting;
  GraphedStage stage(std::make_unique<ListedStage>(), counting.recorder());
  for (int s = 0; s < 3; ++s) one_step(stage);
  ASSERT_GT(stage.replayed(), 0u);
  EXPECT_THROW(stage.forward(0, 2, nullptr, nullptr), std::logic_error);  // a third micro-batch
  float other_buffer = 0.0f;
  EXPECT_THROW(stage.forward(0, 0, &other_buffer, nullptr), std::logic_error);  // its input elsewhere
  EXPECT_THROW(stage.backward(0, 1, nullptr, nullptr, WeightGrads::now, false), std::logic_error);  // B, not I
}

// The same weights changed the same way on both models between steps, as the optimizer would.
void nudge(Transformer& model, int step) {
  FloatBuffer values = model.params().values;
  const float factor = 1.0f + 0.01f * static_cast<float>(step);
  Kokkos::parallel_for(
      "nudge", Kokkos::RangePolicy<ExecSpace>(0, values.extent(0)), KOKKOS_LAMBDA(long i) { values(i) *= factor; });
}

double loss_sum(StageCompute& stage) {
  Kokkos::View<double*, MemSpace> total("total", 1);
  stage.take_loss_sum(total.data());
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), total);
  return host(0);
}

TEST(GraphedStage, ReplayedStepsTrainAsTheSameStepsRunDirectly) {
  if (!DeviceGraph::available()) GTEST_SKIP() << "the CPU build has no device graphs";
  const ModelConfig cfg = tiny_config();
  const int B = 2, N = B * cfg.seq_len;
  std::vector<IntBuffer> inputs, targets;
  for (int m = 0; m < 2; ++m) {
    inputs.push_back(random_tokens(N, cfg.vocab, 10 + m));
    targets.push_back(random_tokens(N, cfg.vocab, 20 + m));
  }
  Transformer direct_model(cfg, B, 9, no_tp()), graphed_model(cfg, B, 9, no_tp());
  ModelStage direct(direct_model, inputs, targets, {}, 1.0f / (2 * N), {});
  GraphedStage graphed(std::make_unique<ModelStage>(graphed_model, inputs, targets, std::vector<TokenPositions>{},
                                                    1.0f / (2 * N), Transformer::GradsReadyFn{}));
  for (int step = 0; step < 4; ++step) {
    for (int m = 0; m < 2; ++m) {  // new tokens in the same buffers, as each step's upload writes them
      Kokkos::deep_copy(inputs[m], random_tokens(N, cfg.vocab, 100 * step + m));
      Kokkos::deep_copy(targets[m], random_tokens(N, cfg.vocab, 100 * step + 50 + m));
    }
    nudge(direct_model, step);
    nudge(graphed_model, step);
    direct_model.zero_grads();
    graphed_model.zero_grads();
    one_step(direct);
    one_step(graphed);
    const double expected = loss_sum(direct), got = loss_sum(graphed);
    EXPECT_NEAR(got, expected, 1e-6 * std::abs(expected)) << "step " << step;
    const std::vector<float> a = to_host(direct_model.params().grads), b = to_host(graphed_model.params().grads);
    float largest = 0.0f;
    for (float g : a) largest = std::max(largest, std::abs(g));
    ASSERT_GT(largest, 1e-4f);
    for (std::size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(b[i], a[i], 1e-6f * largest) << "step " << step << ", gradient " << i;
  }
  EXPECT_EQ(graphed.recorded(), 5u);
  EXPECT_EQ(graphed.replayed(), 10u);
}

}  // namespace
}  // namespace trident
