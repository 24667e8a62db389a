// The simulator against closed forms: 1F1B and GPipe bubbles (p − 1)/(m + p − 1), 1F1B's
// min(p − r, m) activations, and the published gains of ZB-H1 and interleaving.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "schedule/schedule.hpp"
#include "test_util.hpp"

namespace trident {
namespace {

using testing::input_error_message;

SimulatedStep simulate_uniform(const Schedule& schedule, double latency = 0.0) {
  return simulate(schedule, ActionCosts::uniform(schedule.virtual_stages(), schedule.chunks, 1.0, 2.0, 1.0,
                                                 1.0, latency));
}

int max_peak(const SimulatedStep& step) {
  return *std::max_element(step.peak_in_flight.begin(), step.peak_in_flight.end());
}

TEST(Simulate, OneFOneBAndGpipeBubbleIsTheClosedForm) {
  for (const ScheduleKind kind : {ScheduleKind::one_f_one_b, ScheduleKind::gpipe}) {
    for (int p : {1, 2, 3, 4, 8}) {
      for (int m : {1, 2, 3, 4, 7, 8, 16, 25}) {
        const SimulatedStep step = simulate_uniform(make_schedule(kind, p, m, 1));
        const double theory = static_cast<double>(p - 1) / (m + p - 1);
        EXPECT_NEAR(step.bubble, theory, 1e-12) << word_of(kind) << " p=" << p << " m=" << m;
        EXPECT_NEAR(step.step_time, 3.0 * (m + p - 1), 1e-12) << word_of(kind) << " p=" << p << " m=" << m;
      }
    }
  }
}

TEST(Simulate, OneFOneBHoldsMinOfPMinusRankAndM) {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {1, 3, 4, 8, 17}) {
      const SimulatedStep step = simulate_uniform(make_schedule(ScheduleKind::one_f_one_b, p, m, 1));
      ASSERT_EQ(static_cast<int>(step.peak_in_flight.size()), p);
      for (int rank = 0; rank < p; ++rank) {
        EXPECT_EQ(step.peak_in_flight[rank], std::min(p - rank, m)) << "p=" << p << " m=" << m << " rank " << rank;
      }
    }
  }
}

TEST(Simulate, GpipeHoldsEveryMicrobatch) {
  const SimulatedStep step = simulate_uniform(make_schedule(ScheduleKind::gpipe, 4, 6, 1));
  EXPECT_EQ(step.peak_in_flight, std::vector<int>(4, 6));
}

TEST(Simulate, TimedActionsFollowTheScheduleAndDoNotOverlap) {
  const Schedule schedule = make_schedule(ScheduleKind::zb_h1, 4, 8, 1);
  const SimulatedStep step = simulate_uniform(schedule);
  ASSERT_EQ(step.per_rank.size(), 4u);
  double busy = 0.0;
  for (int rank = 0; rank < 4; ++rank) {
    ASSERT_EQ(step.per_rank[rank].size(), schedule.actions[rank].size());
    double free_at = 0.0;
    for (std::size_t i = 0; i < step.per_rank[rank].size(); ++i) {
      const TimedAction& timed = step.per_rank[rank][i];
      EXPECT_EQ(timed.action, schedule.actions[rank][i]);
      EXPECT_GE(timed.start, free_at);
      EXPECT_NEAR(timed.end - timed.start, 1.0, 1e-12);  // F = I = W = 1
      free_at = timed.end;
      busy += timed.end - timed.start;
      EXPECT_LE(timed.end, step.step_time);
    }
  }
  EXPECT_NEAR(step.bubble, 1.0 - busy / (4 * step.step_time), 1e-12);
}

// Qi et al.: with F = I = W, ZB-H1's idle time is a third of 1F1B's, at 1F1B's peak memory.
TEST(Simulate, ZeroBubbleH1CutsTheBubbleAtTheSameMemory) {
  const SimulatedStep one_f_one_b = simulate_uniform(make_schedule(ScheduleKind::one_f_one_b, 4, 8, 1));
  const SimulatedStep zb = simulate_uniform(make_schedule(ScheduleKind::zb_h1, 4, 8, 1));
  EXPECT_LE(zb.bubble, 0.5 * one_f_one_b.bubble);
  // Idle time per rank: 1F1B 3(p − 1) = 9, ZB-H1 (p − 1) = 3, with 24 units of work each.
  EXPECT_NEAR(one_f_one_b.step_time, 24.0 + 9.0, 1e-12);
  EXPECT_NEAR(zb.step_time, 24.0 + 3.0, 1e-12);
  // ZB-H1 holds 1F1B's peak (rank 0's p) on every rank: the W's wait, the activations stay.
  EXPECT_EQ(max_peak(zb), max_peak(one_f_one_b));
  EXPECT_EQ(zb.peak_in_flight, std::vector<int>(4, 4));
}

TEST(Simulate, InterleavingShrinksTheBubble) {
  const SimulatedStep one_f_one_b = simulate_uniform(make_schedule(ScheduleKind::one_f_one_b, 4, 8, 1));
  const SimulatedStep interleaved = simulate_uniform(make_schedule(ScheduleKind::interleaved_1f1b, 4, 8, 2));
  EXPECT_LT(interleaved.bubble, one_f_one_b.bubble);
  EXPECT_LT(interleaved.step_time, one_f_one_b.step_time);
}

TEST(Simulate, LatencyLengthensTheStep) {
  for (const ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zb_h1}) {
    const Schedule schedule = make_schedule(kind, 4, 8, 1);
    const SimulatedStep fast = simulate_uniform(schedule, 0.0);
    const SimulatedStep slow = simulate_uniform(schedule, 0.5);
    EXPECT_GT(slow.step_time, fast.step_time) << word_of(kind);
    EXPECT_GT(slow.bubble, fast.bubble) << word_of(kind);
  }
  // One micro-batch on two ranks: F, message, F, B, message, B.
  const Schedule single = make_schedule(ScheduleKind::one_f_one_b, 2, 1, 1);
  EXPECT_NEAR(simulate_uniform(single, 0.5).step_time, 6.0 + 2 * 0.5, 1e-12);
}

// On one rank the chunks hand over to each other without any message.
TEST(Simulate, SameRankChunksPayNoLatency) {
  const Schedule schedule = make_schedule(ScheduleKind::interleaved_1f1b, 1, 3, 2);
  const SimulatedStep fast = simulate_uniform(schedule, 0.0);
  const SimulatedStep slow = simulate_uniform(schedule, 5.0);
  EXPECT_NEAR(fast.step_time, 3 * 3.0, 1e-12);
  EXPECT_NEAR(slow.step_time, fast.step_time, 1e-12);
  EXPECT_NEAR(slow.bubble, 0.0, 1e-12);
}

TEST(Simulate, RejectsInvalidInput) {
  Schedule broken = make_schedule(ScheduleKind::one_f_one_b, 2, 2, 1);
  broken.actions[0].pop_back();
  EXPECT_NE(input_error_message([&] { simulate_uniform(broken); }).find("invalid schedule"), std::string::npos);

  const Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, 2, 2, 1);
  EXPECT_NE(input_error_message([&] { simulate(schedule, ActionCosts::uniform(3, 1)); }).find("3 virtual stages"),
            std::string::npos);
}

TEST(Simulate, UsesEachVirtualStagesOwnCosts) {
  // A slow last stage dominates: with p = 2, m = 4, stage 1's F = 3 makes it the bottleneck.
  ActionCosts costs = ActionCosts::uniform(2, 1);
  costs.per_virtual_stage[1].forward = 3.0;
  const SimulatedStep step = simulate(make_schedule(ScheduleKind::one_f_one_b, 2, 4, 1), costs);
  // Rank 1 is never idle after its first input arrives at t = 1: 1 + 4·(3 + 2), then rank 0's B3.
  EXPECT_NEAR(step.step_time, 1.0 + 4 * 5.0 + 2.0, 1e-12);
}

}  // namespace
}  // namespace trident
