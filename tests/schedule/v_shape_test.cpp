// The V-shape kinds (zb-v, v-half): the V placement, validity over a sweep of (p, m, budget), the
// activation budget each keeps, and how close zb-v comes to the bound no schedule can beat: the last
// rank of the V cannot start before the first micro-batch has crossed the p − 1 ranks before it, and
// then has 6m chunk actions (F, I, W of two chunks per micro-batch) to run.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "plan/pipeline_theory.hpp"
#include "schedule/v_shape.hpp"
#include "schedule/schedule.hpp"
#include "test_util.hpp"

namespace trident {
namespace {

using testing::input_error_message;

struct VCase {
  ScheduleKind kind;
  double budget;
};
const std::vector<VCase> kVCases = {
    {ScheduleKind::zb_v, 1.0}, {ScheduleKind::v_half, 0.25}, {ScheduleKind::v_half, 0.5}, {ScheduleKind::v_half, 0.75}};

// Every chunk action costs one unit (a whole stage's F, I and W split over two chunks: 0.5 each).
constexpr double kChunkAction = 0.5;
ActionCosts equal_costs(int p) { return ActionCosts::uniform(2 * p, 2); }

TEST(VShape, EverySweptScheduleIsValidPlacedInAVAndWithinItsBudget) {
  int checked = 0;
  for (const VCase& c : kVCases) {
    for (int p : {1, 2, 3, 4, 8}) {
      for (int m : {1, p - 1, p, 2 * p + 1, 3 * p}) {
        if (m < 1) continue;
        SCOPED_TRACE(word_of(c.kind) + " budget " + std::to_string(c.budget) + " p=" + std::to_string(p) +
                     " m=" + std::to_string(m));
        const Schedule schedule = make_schedule(c.kind, p, m, 2, c.budget);
        ASSERT_EQ(find_schedule_problem(schedule), "");
        EXPECT_TRUE(schedule.splits_backward());
        for (int rank = 0; rank < p; ++rank) {
          EXPECT_EQ(schedule.virtual_stage[rank], (std::vector<int>{rank, 2 * p - 1 - rank}));
          EXPECT_EQ(schedule.actions[rank].size(), static_cast<std::size_t>(6 * m));
        }
        const SimulatedStep step = simulate(schedule, equal_costs(p));
        const int cap = v_shape_activation_cap(c.kind, p, c.budget);
        for (int rank = 0; rank < p; ++rank) EXPECT_LE(step.peak_in_flight[rank], cap) << "rank " << rank;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 4 * 24);
}

TEST(VShape, BudgetsAreOneFOneBsPeakAndAFractionOfIt) {
  EXPECT_EQ(v_shape_activation_cap(ScheduleKind::zb_v, 8, 0.3), 16);  // zb-v ignores the budget
  EXPECT_EQ(v_shape_activation_cap(ScheduleKind::v_half, 8, 0.5), 8);
  EXPECT_EQ(v_shape_activation_cap(ScheduleKind::v_half, 3, 0.5), 3);
  EXPECT_EQ(v_shape_activation_cap(ScheduleKind::v_half, 1, 0.1), 2);  // one place per chunk at least
  // 1F1B's rank 0 holds p micro-batches of a whole stage = 2p chunk activations; v-half 0.5 holds
  // half of that, measured in the simulated step.
  const SimulatedStep one_f_one_b =
      simulate(make_schedule(ScheduleKind::one_f_one_b, 8, 16, 1), ActionCosts::uniform(8, 1));
  const SimulatedStep zb_v = simulate(make_schedule(ScheduleKind::zb_v, 8, 16, 2), equal_costs(8));
  const SimulatedStep v_half = simulate(make_schedule(ScheduleKind::v_half, 8, 16, 2, 0.5), equal_costs(8));
  const int zb_v_peak = *std::max_element(zb_v.peak_in_flight.begin(), zb_v.peak_in_flight.end());
  const int v_half_peak = *std::max_element(v_half.peak_in_flight.begin(), v_half.peak_in_flight.end());
  EXPECT_LE(zb_v_peak, 2 * one_f_one_b.peak_in_flight[0]);
  EXPECT_LE(v_half_peak, one_f_one_b.peak_in_flight[0]);
}

TEST(VShape, ZeroBubbleVComesWithinTwoActionsOfTheFillBound) {
  for (int p : {2, 4, 8}) {
    for (int m : {p, 2 * p, 4 * p}) {
      const SimulatedStep step = simulate(make_schedule(ScheduleKind::zb_v, p, m, 2), equal_costs(p));
      const double bound = (6.0 * m + p - 1) * kChunkAction;
      EXPECT_GE(step.step_time, bound - 1e-9) << "p=" << p << " m=" << m;
      EXPECT_LE(step.step_time, bound + 2 * kChunkAction) << "p=" << p << " m=" << m;
    }
  }
}

TEST(VShape, ZeroBubbleVBeatsZbH1AndVHalfBeats1F1BWithThreeQuartersOfItsMemory) {
  const auto bubble = [](ScheduleKind kind, int chunks, double budget = 0.5) {
    const int p = 8;
    return simulate(make_schedule(kind, p, 16, chunks, budget), ActionCosts::uniform(p * chunks, chunks)).bubble;
  };
  EXPECT_LT(bubble(ScheduleKind::zb_v, 2), 0.7 * bubble(ScheduleKind::zb_h1, 1));
  EXPECT_LT(bubble(ScheduleKind::v_half, 2, 0.75), 0.65 * bubble(ScheduleKind::one_f_one_b, 1));
}

TEST(VShape, RejectsOtherChunkCountsAndBudgets) {
  for (const ScheduleKind kind : {ScheduleKind::zb_v, ScheduleKind::v_half}) {
    for (int v : {1, 3}) {
      const std::string message = input_error_message([&] { make_schedule(kind, 4, 8, v); });
      EXPECT_NE(message.find("virtual_stages = 2"), std::string::npos) << message;
    }
  }
  for (double budget : {0.0, -0.5, 1.5}) {
    const std::string message = input_error_message([&] { make_schedule(ScheduleKind::v_half, 4, 8, 2, budget); });
    EXPECT_NE(message.find("activation_budget"), std::string::npos) << message;
  }
}

// DualPipeV: the V placement, DeepSeek's phases, valid for every p and m >= 2p; each rank's list
// holds every F, and for each backward a B or an I with its W.
TEST(DualPipeV, IsValidInAVForMAtLeastTwiceP) {
  for (int p : {1, 2, 3, 4, 8}) {
    for (int m : {2 * p, 2 * p + 1, 3 * p, 4 * p}) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      const Schedule schedule = make_schedule(ScheduleKind::dualpipe_v, p, m, 2);
      ASSERT_EQ(find_schedule_problem(schedule), "");
      for (int rank = 0; rank < p; ++rank)
        EXPECT_EQ(schedule.virtual_stage[rank], (std::vector<int>{rank, 2 * p - 1 - rank}));
      // Its steady phase pairs an F with a B of the other chunk.
      if (m > 2 * p) {
        const std::vector<Action>& first = schedule.actions[0];
        const auto pair = std::adjacent_find(first.begin(), first.end(), [](const Action& a, const Action& b) {
          return a.kind == ActionKind::forward && b.kind == ActionKind::backward && a.chunk != b.chunk;
        });
        EXPECT_NE(pair, first.end());
      }
    }
  }
}

TEST(DualPipeV, PeakActivationsAreThePlansFigure) {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {2 * p, 3 * p + 1}) {
      ScheduleConfig config;
      config.kind = ScheduleKind::dualpipe_v;
      config.microbatches = m;
      config.virtual_stages = 2;
      const SimulatedStep step = simulate(make_schedule(ScheduleKind::dualpipe_v, p, m, 2), equal_costs(p));
      const int peak = *std::max_element(step.peak_in_flight.begin(), step.peak_in_flight.end());
      EXPECT_DOUBLE_EQ(peak / 2.0, in_flight_microbatches(config, 0, p)) << "p=" << p << " m=" << m;
    }
  }
}

TEST(DualPipeV, NeedsTwoMicroBatchesPerStage) {
  const std::string message = input_error_message([] { make_schedule(ScheduleKind::dualpipe_v, 4, 7, 2); });
  EXPECT_NE(message.find("m >= 2p"), std::string::npos) << message;
  EXPECT_NE(input_error_message([] { make_schedule(ScheduleKind::dualpipe_v, 4, 8, 1); }).find("virtual_stages = 2"),
            std::string::npos);
}

// At equal costs it holds no more than 1F1B's activations plus the one pair it starts ahead, and
// its bubble is below 1F1B's.
TEST(DualPipeV, BeatsOneFOneBAtAboutItsMemory) {
  const SimulatedStep one_f_one_b =
      simulate(make_schedule(ScheduleKind::one_f_one_b, 8, 16, 1), ActionCosts::uniform(8, 1));
  const SimulatedStep dualpipe = simulate(make_schedule(ScheduleKind::dualpipe_v, 8, 16, 2), equal_costs(8));
  EXPECT_LT(dualpipe.bubble, one_f_one_b.bubble);
  const int peak = *std::max_element(dualpipe.peak_in_flight.begin(), dualpipe.peak_in_flight.end());
  EXPECT_LE(peak, 2 * one_f_one_b.peak_in_flight[0] + 2);
}

}  // namespace
}  // namespace trident
