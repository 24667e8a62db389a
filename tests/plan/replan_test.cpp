// Re-planning from measured costs: the candidates keep the running placement, the fastest that fits
// the memory limit wins when it saves more than the threshold, and the V's list scheduler orders
// unequal stages for their costs.
#include "plan/replan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "plan/rebalance.hpp"
#include "schedule/schedule.hpp"
#include "schedule/v_shape.hpp"

namespace trident {
namespace {

ReplanOptions threshold(double fraction) {
  ReplanOptions options;
  options.threshold = fraction;
  return options;
}

ReplanOptions memory_limit(double limit) {
  ReplanOptions options;
  options.memory_limit = limit;
  return options;
}

ReplanOptions movable(std::vector<StageLayers> partition) {
  ReplanOptions options;
  options.movable_partition = std::move(partition);
  return options;
}

// Every virtual stage F = 1, I = W = 1 (B = 2), the last one `heavy` times that (the head and loss).
ActionCosts with_heavy_last(int virtual_stages, double heavy) {
  ActionCosts costs = ActionCosts::uniform(virtual_stages, 1);
  ActionCosts::Stage& last = costs.per_virtual_stage.back();
  last = {heavy, 2 * heavy, heavy, heavy};
  return costs;
}

TEST(Replan, OneFOneBSwitchesToZbH1WhenItSavesEnough) {
  const Schedule running = make_schedule(ScheduleKind::one_f_one_b, 4, 8, 1);
  const ReplanDecision decision = replan(running, ActionCosts::uniform(4, 1), {});
  EXPECT_TRUE(decision.switches) << decision.summary;
  EXPECT_EQ(decision.best.kind, ScheduleKind::zb_h1);
  EXPECT_LT(decision.best_time, 0.95 * decision.running_time);
  EXPECT_EQ(simulate(decision.best, ActionCosts::uniform(4, 1)).step_time, decision.best_time);
  EXPECT_NE(decision.summary.find("1f1b (running)"), std::string::npos) << decision.summary;
  EXPECT_NE(decision.summary.find("gpipe"), std::string::npos) << decision.summary;
}

TEST(Replan, KeepsTheRunningScheduleBelowTheThresholdOrOverTheMemoryLimit) {
  const Schedule running = make_schedule(ScheduleKind::one_f_one_b, 4, 8, 1);
  const ReplanDecision small_saving = replan(running, ActionCosts::uniform(4, 1), threshold(0.9));
  EXPECT_FALSE(small_saving.switches);
  EXPECT_EQ(small_saving.best.kind, ScheduleKind::one_f_one_b);
  // zb-h1 holds p micro-batches on every rank, gpipe m: a limit of 3 leaves only 1F1B... whose
  // rank 0 holds 4 too; nothing that fits beats the running schedule, which stays.
  const ReplanDecision tight = replan(running, ActionCosts::uniform(4, 1), memory_limit(3.0));
  EXPECT_FALSE(tight.switches);
  EXPECT_NE(tight.summary.find("over the memory limit"), std::string::npos) << tight.summary;
}

TEST(Replan, TheVIsReorderedForAHeavyLastStage) {
  const int p = 4, m = 8;
  const ActionCosts measured = with_heavy_last(2 * p, 3.0);
  const Schedule equal_order = make_schedule(ScheduleKind::zb_v, p, m, 2);
  const Schedule measured_order = make_v_shape(ScheduleKind::zb_v, p, m, 1.0, measured);
  ASSERT_EQ(find_schedule_problem(measured_order), "");
  EXPECT_LT(simulate(measured_order, measured).step_time, simulate(equal_order, measured).step_time);
  const ReplanDecision decision = replan(equal_order, measured, threshold(0.0));
  EXPECT_EQ(decision.best.chunks, 2);
  EXPECT_LE(decision.best_time, simulate(measured_order, measured).step_time);
  for (int rank = 0; rank < p; ++rank)
    EXPECT_EQ(decision.best.virtual_stage[rank], equal_order.virtual_stage[rank]) << "the chunks must stay put";
}

TEST(Replan, InterleavedHasNothingToChooseFrom) {
  const Schedule running = make_schedule(ScheduleKind::interleaved_1f1b, 2, 4, 2);
  const ReplanDecision decision = replan(running, ActionCosts::uniform(4, 2), threshold(0.0));
  EXPECT_FALSE(decision.switches);
  EXPECT_EQ(decision.best.kind, ScheduleKind::interleaved_1f1b);
}

// Two stages of 1 and 3 layers; a layer's F = 1, B = 2 (I = W = 1), the head twice a layer:
// stage 0 measures F = 1, stage 1 F = 3 + 2 = 5.
ActionCosts one_and_three_layers() {
  ActionCosts costs;
  costs.per_virtual_stage = {{1.0, 2.0, 1.0, 1.0}, {5.0, 10.0, 5.0, 5.0}};
  return costs;
}

TEST(Rebalance, TheFitReadsALayerFromTheBodyAndTheHeadFromWhatTheLastStageLeaves) {
  const LayerCosts fit = fit_layer_costs({{0, 1}, {1, 3}}, one_and_three_layers());
  EXPECT_DOUBLE_EQ(fit.fixed.forward, 0.0) << "one stage before the last cannot tell a fixed cost from a layer's";
  EXPECT_DOUBLE_EQ(fit.layer.forward, 1.0);
  EXPECT_DOUBLE_EQ(fit.layer.backward, 2.0);
  EXPECT_DOUBLE_EQ(fit.head.forward, 2.0);
  EXPECT_DOUBLE_EQ(fit.head.weight_grad, 2.0);
  // A last stage measured faster than its layers (noise) has no head, not a negative one.
  ActionCosts noisy = one_and_three_layers();
  noisy.per_virtual_stage.back().forward = 2.5;
  EXPECT_DOUBLE_EQ(fit_layer_costs({{0, 1}, {1, 3}}, noisy).head.forward, 0.0);
  EXPECT_THROW(fit_layer_costs({{0, 4}}, ActionCosts::uniform(1, 1)), std::invalid_argument);
}

TEST(Rebalance, StagesOfDifferentLayerCountsSeparateAFixedCostPerActionFromTheLayers) {
  // A fixed F of 0.5 per action, 1 per layer, the head 2: stages of 1, 2, 3 layers, then 2 + head.
  ActionCosts measured;
  for (const double forward : {1.5, 2.5, 3.5, 4.5}) measured.per_virtual_stage.push_back({forward, 0, 0, 0});
  const std::vector<StageLayers> partition{{0, 1}, {1, 2}, {3, 3}, {6, 2}};
  const LayerCosts fit = fit_layer_costs(partition, measured);
  EXPECT_NEAR(fit.fixed.forward, 0.5, 1e-12);
  EXPECT_NEAR(fit.layer.forward, 1.0, 1e-12);
  EXPECT_NEAR(fit.head.forward, 2.0, 1e-12);
  EXPECT_NEAR(predicted_action_costs(fit, {{0, 4}, {4, 4}}, 0.0).per_virtual_stage[1].forward, 6.5, 1e-12);
}

TEST(Rebalance, TheBalancedSplitGivesTheHeadsStageFewerLayersAndPredictsItsCosts) {
  const LayerCosts fit = fit_layer_costs({{0, 1}, {1, 3}}, one_and_three_layers());
  // The head weighs two layers: 3 | 1 + head costs 3 and 3.
  const std::vector<StageLayers> balanced = measured_balanced_partition(fit, 4, 2);
  EXPECT_EQ(balanced, (std::vector<StageLayers>{{0, 3}, {3, 1}}));
  const ActionCosts predicted = predicted_action_costs(fit, balanced, 0.25);
  EXPECT_DOUBLE_EQ(predicted.per_virtual_stage[0].forward, 3.0);
  EXPECT_DOUBLE_EQ(predicted.per_virtual_stage[1].forward, 3.0);
  EXPECT_DOUBLE_EQ(predicted.per_virtual_stage[1].backward, 6.0);
  EXPECT_DOUBLE_EQ(predicted.p2p_latency, 0.25);
}

TEST(Replan, MovesLayersWhenTheBalancedSplitRunsFaster) {
  const Schedule running = make_schedule(ScheduleKind::one_f_one_b, 2, 4, 1);
  const ActionCosts measured = one_and_three_layers();
  const ReplanDecision stay = replan(running, measured, {});
  EXPECT_TRUE(stay.moved_to.empty()) << "layers move only when the caller says they may";
  const ReplanDecision decision = replan(running, measured, movable({{0, 1}, {1, 3}}));
  EXPECT_TRUE(decision.switches) << decision.summary;
  EXPECT_EQ(decision.moved_to, (std::vector<StageLayers>{{0, 3}, {3, 1}})) << decision.summary;
  // 1F1B with stages of 3 and 3 (F) instead of 1 and 5: the bottleneck stage goes from 15 per
  // micro-batch to 9.
  EXPECT_LT(decision.best_time, 0.75 * decision.running_time) << decision.summary;
  EXPECT_NE(decision.summary.find("layers 1|3 moved to 3|1"), std::string::npos) << decision.summary;
  // A split that is already balanced stays.
  const ReplanDecision balanced = replan(running, ActionCosts::uniform(2, 1), movable({{0, 2}, {2, 2}}));
  EXPECT_TRUE(balanced.moved_to.empty()) << balanced.summary;
}

// The largest F + B of a stage of `counts` under `fit` and `slowness`, computed here from the model
// rebalance.hpp states.
double slowest_stage(const LayerCosts& fit, const std::vector<int>& counts, const std::vector<double>& slowness) {
  double slowest = 0.0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const bool last = i + 1 == counts.size();
    const double per_action = fit.fixed.forward + fit.fixed.backward +
                              counts[i] * (fit.layer.forward + fit.layer.backward) +
                              (last ? fit.head.forward + fit.head.backward : 0.0);
    slowest = std::max(slowest, slowness[i] * per_action);
  }
  return slowest;
}

// Every split of `layers` into `pieces` (each at least one layer): the least slowest stage.
double best_by_search(const LayerCosts& fit, int layers, const std::vector<double>& slowness) {
  const int pieces = static_cast<int>(slowness.size());
  std::vector<int> counts(static_cast<std::size_t>(pieces), 1);
  double best = 1e300;
  const auto search = [&](auto&& self, int piece, int left) -> void {
    if (piece == pieces - 1) {
      counts.back() = left;
      best = std::min(best, slowest_stage(fit, counts, slowness));
      return;
    }
    for (int n = 1; n <= left - (pieces - 1 - piece); ++n) {
      counts[static_cast<std::size_t>(piece)] = n;
      self(self, piece + 1, left - n);
    }
  };
  search(search, 0, layers);
  return best;
}

TEST(Rebalance, AStragglersStageGetsFewerLayersAndTheSplitIsTheBestThereIs) {
  LayerCosts fit;
  fit.fixed = {0.5, 1.0, 0.5, 0.5};
  fit.layer = {1.0, 2.0, 1.0, 1.0};
  fit.head = {3.0, 3.0, 1.5, 1.5};
  const std::vector<std::vector<double>> cases = {{2.0, 1.0}, {1.0, 1.6}, {1.0, 3.0, 1.0}, {1.3, 1.0, 1.0, 1.8}};
  for (const std::vector<double>& slowness : cases) {
    for (int layers : {8, 13}) {
      const std::vector<StageLayers> split =
          measured_balanced_partition(fit, layers, static_cast<int>(slowness.size()), slowness);
      std::vector<int> counts;
      for (const StageLayers& stage : split) counts.push_back(stage.num_layers);
      EXPECT_EQ(split.back().end_layer(), layers);
      EXPECT_DOUBLE_EQ(slowest_stage(fit, counts, slowness), best_by_search(fit, layers, slowness))
          << layers << " layers, slowness " << slowness[0] << ", " << slowness[1];
      const ActionCosts predicted = predicted_action_costs(fit, split, 0.0, slowness);
      EXPECT_DOUBLE_EQ(predicted.per_virtual_stage[0].forward,
                       slowness[0] * (fit.fixed.forward + counts[0] * fit.layer.forward));
    }
  }
  // A first stage twice as slow, no head: 8 layers go 3 | 5 (or 2 | 6: both take 6 layers' time).
  LayerCosts plain;
  plain.fixed = plain.head = {0.0, 0.0, 0.0, 0.0};
  const std::vector<StageLayers> split = measured_balanced_partition(plain, 8, 2, {2.0, 1.0});
  EXPECT_LT(split[0].num_layers, 4);
}

// One stage's slowest rank takes twice as long as its peers: re-planning moves layers off it, says
// why, and predicts a faster step. Under kStragglerFactor the same costs leave the layers.
TEST(Replan, MovesLayersOffAStragglersStage) {
  const Schedule running = make_schedule(ScheduleKind::one_f_one_b, 2, 4, 1);
  ActionCosts measured = ActionCosts::uniform(2, 1);  // per stage of 4 layers, its slowest rank's
  measured.per_virtual_stage[0] = {2.0, 4.0, 2.0, 2.0};
  ReplanOptions options = movable({{0, 4}, {4, 4}});
  options.slowdowns = {{2.0, 6}, {1.02, 3}};
  const ReplanDecision decision = replan(running, measured, options);
  EXPECT_TRUE(decision.switches) << decision.summary;
  ASSERT_EQ(decision.moved_to.size(), 2u) << decision.summary;
  EXPECT_LT(decision.moved_to[0].num_layers, 4) << decision.summary;
  EXPECT_NE(decision.summary.find("stage 0's world rank 6 takes 2.00x as long as its peers"), std::string::npos)
      << decision.summary;
  EXPECT_EQ(decision.summary.find("stage 1's"), std::string::npos) << "1.02 is no straggler: " << decision.summary;
  EXPECT_LT(decision.best_time, 0.85 * decision.running_time) << decision.summary;

  options.slowdowns = {{1.05, 6}, {1.0, 3}};
  const ReplanDecision unnoticed = replan(running, ActionCosts::uniform(2, 1), options);
  EXPECT_TRUE(unnoticed.moved_to.empty()) << unnoticed.summary;
  EXPECT_EQ(unnoticed.summary.find("world rank"), std::string::npos) << unnoticed.summary;
}

}  // namespace
}  // namespace trident
