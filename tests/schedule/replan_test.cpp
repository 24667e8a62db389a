// Re-planning from measured costs: the candidates keep the running placement, the fastest that fits
// the memory limit wins when it saves more than the threshold, and the V's list scheduler orders
// unequal stages for their costs.
#include "schedule/replan.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedule/schedule.hpp"
#include "schedule/v_shape.hpp"

namespace trident {
namespace {

// Every virtual stage F = 1, I = W = 1 (B = 2), the last one `heavy` times that (the head and loss).
ActionCosts with_heavy_last(int virtual_stages, double heavy) {
  ActionCosts costs = ActionCosts::uniform(virtual_stages, 1);
  ActionCosts::Stage& last = costs.per_virtual_stage.back();
  last = {heavy, 2 * heavy, heavy, heavy};
  return costs;
}

TEST(Replan, OneFOneBSwitchesToZbH1WhenItSavesEnough) {
  const Schedule running = make_schedule(ScheduleKind::one_f_one_b, 4, 8, 1);
  const ReplanDecision decision = replan(running, ActionCosts::uniform(4, 1), 0.0, 0.5, 0.05);
  EXPECT_TRUE(decision.switches) << decision.summary;
  EXPECT_EQ(decision.best.kind, ScheduleKind::zb_h1);
  EXPECT_LT(decision.best_time, 0.95 * decision.running_time);
  EXPECT_EQ(simulate(decision.best, ActionCosts::uniform(4, 1)).step_time, decision.best_time);
  EXPECT_NE(decision.summary.find("1f1b (running)"), std::string::npos) << decision.summary;
  EXPECT_NE(decision.summary.find("gpipe"), std::string::npos) << decision.summary;
}

TEST(Replan, KeepsTheRunningScheduleBelowTheThresholdOrOverTheMemoryLimit) {
  const Schedule running = make_schedule(ScheduleKind::one_f_one_b, 4, 8, 1);
  const ReplanDecision small_saving = replan(running, ActionCosts::uniform(4, 1), 0.0, 0.5, 0.9);
  EXPECT_FALSE(small_saving.switches);
  EXPECT_EQ(small_saving.best.kind, ScheduleKind::one_f_one_b);
  // zb-h1 holds p micro-batches on every rank, gpipe m: a limit of 3 leaves only 1F1B... whose
  // rank 0 holds 4 too; nothing that fits beats the running schedule, which stays.
  const ReplanDecision tight = replan(running, ActionCosts::uniform(4, 1), 3.0, 0.5, 0.05);
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
  const ReplanDecision decision = replan(equal_order, measured, 0.0, 0.5, 0.0);
  EXPECT_EQ(decision.best.chunks, 2);
  EXPECT_LE(decision.best_time, simulate(measured_order, measured).step_time);
  for (int rank = 0; rank < p; ++rank)
    EXPECT_EQ(decision.best.virtual_stage[rank], equal_order.virtual_stage[rank]) << "the chunks must stay put";
}

TEST(Replan, InterleavedHasNothingToChooseFrom) {
  const Schedule running = make_schedule(ScheduleKind::interleaved_1f1b, 2, 4, 2);
  const ReplanDecision decision = replan(running, ActionCosts::uniform(4, 2), 0.0, 0.5, 0.0);
  EXPECT_FALSE(decision.switches);
  EXPECT_EQ(decision.best.kind, ScheduleKind::interleaved_1f1b);
}

}  // namespace
}  // namespace trident
