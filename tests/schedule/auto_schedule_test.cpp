// "auto": the lowest simulated bubble that fits the memory limit, and a clear error when nothing fits.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "schedule/schedule.hpp"
#include "test_util.hpp"

namespace trident {
namespace {

using testing::input_error_message;

double bubble_of(const Schedule& schedule) {
  return simulate(schedule, ActionCosts::uniform(schedule.virtual_stages(), schedule.chunks)).bubble;
}

double memory_of(const Schedule& schedule) {
  const SimulatedStep step = simulate(schedule, ActionCosts::uniform(schedule.virtual_stages(), schedule.chunks));
  return static_cast<double>(*std::max_element(step.peak_in_flight.begin(), step.peak_in_flight.end())) /
         schedule.chunks;
}

TEST(AutoSchedule, DefaultMemoryPicksZeroBubbleH1) {
  const Schedule chosen = choose_auto_schedule(4, 8, 1, 0.0);
  EXPECT_EQ(chosen.kind, ScheduleKind::zb_h1);
  EXPECT_EQ(chosen.stages, 4);
  EXPECT_EQ(chosen.microbatches, 8);
  EXPECT_EQ(find_schedule_problem(chosen), "");
}

// Two chunks per rank allow the V: zb-v, at 1F1B's memory, beats zb-h1.
TEST(AutoSchedule, TwoChunksAtDefaultMemoryPickZeroBubbleV) {
  const Schedule chosen = choose_auto_schedule(4, 8, 4, 0.0);
  EXPECT_EQ(chosen.kind, ScheduleKind::zb_v);
  EXPECT_LT(bubble_of(chosen), bubble_of(make_schedule(ScheduleKind::zb_h1, 4, 8, 1)));
  EXPECT_LE(memory_of(chosen), 4.0);
}

// Under half of 1F1B's memory only the V with that budget fits.
TEST(AutoSchedule, TightMemoryPicksVHalfWithTheBudgetItLeaves) {
  const Schedule chosen = choose_auto_schedule(8, 16, 2, 4.0);
  EXPECT_EQ(chosen.kind, ScheduleKind::v_half);
  EXPECT_LE(memory_of(chosen), 4.0);
}

// Whatever it picks, no candidate that fits has a lower bubble.
TEST(AutoSchedule, NothingThatFitsIsBetter) {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {1, p, 2 * p + 1, 4 * p}) {
      for (double limit : {0.0, 1.5 * p, 100.0}) {
        const Schedule chosen = choose_auto_schedule(p, m, 3, limit);
        const double budget = limit > 0 ? limit : p;
        EXPECT_LE(memory_of(chosen), budget + 1e-9);
        const double chosen_bubble = bubble_of(chosen);
        for (const ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zb_h1}) {
          const Schedule other = make_schedule(kind, p, m, 1);
          if (memory_of(other) <= budget + 1e-9) {
            EXPECT_LE(chosen_bubble, bubble_of(other) + 1e-12) << word_of(kind);
          }
        }
        for (const ScheduleKind kind : {ScheduleKind::zb_v, ScheduleKind::v_half}) {
          const Schedule other = make_schedule(kind, p, m, 2);
          if (memory_of(other) <= budget + 1e-9) {
            EXPECT_LE(chosen_bubble, bubble_of(other) + 1e-12) << word_of(kind);
          }
        }
        for (int v = 2; v <= 3 && m % p == 0; ++v) {
          const Schedule other = make_schedule(ScheduleKind::interleaved_1f1b, p, m, v);
          if (memory_of(other) <= budget + 1e-9) {
            EXPECT_LE(chosen_bubble, bubble_of(other) + 1e-12) << "v=" << v;
          }
        }
      }
    }
  }
}

TEST(AutoSchedule, NeverGpipeWhenItWouldHoldMoreThanP) {
  for (int p : {2, 3, 4, 8}) {
    for (int m : {p + 1, 2 * p, 5 * p}) {
      EXPECT_NE(choose_auto_schedule(p, m, 1, p).kind, ScheduleKind::gpipe) << "p=" << p << " m=" << m;
      EXPECT_NE(choose_auto_schedule(p, m, 4, p).kind, ScheduleKind::gpipe) << "p=" << p << " m=" << m;
    }
  }
}

// With room for interleaving's extra warm-up activations, more chunks beat ZB-H1 at large p.
TEST(AutoSchedule, MoreMemoryAllowsInterleaving) {
  const Schedule chosen = choose_auto_schedule(8, 16, 4, 100.0);
  EXPECT_LE(bubble_of(chosen), bubble_of(make_schedule(ScheduleKind::zb_h1, 8, 16, 1)));
  EXPECT_GT(memory_of(make_schedule(ScheduleKind::interleaved_1f1b, 8, 16, 2)),
            8.0);  // which is why the default excludes it
}

TEST(AutoSchedule, ExplainsItsChoiceAgainstTheOthers) {
  const std::string why = explain_auto_choice(4, 8, 2, 0.0);
  EXPECT_EQ(why.rfind("zb-v: the lowest simulated bubble, ", 0), 0u) << why;
  EXPECT_NE(why.find("of the 4 stage micro-batches allowed"), std::string::npos) << why;
  // zb-h1 fits (1F1B's memory) with a higher bubble; gpipe holds all 8 micro-batches.
  const std::size_t fits = why.find("others that fit: "), over = why.find("over the limit");
  ASSERT_NE(fits, std::string::npos) << why;
  ASSERT_NE(over, std::string::npos) << why;
  EXPECT_GT(why.find("zb-h1 "), fits) << why;
  EXPECT_LT(why.find("zb-h1 "), over) << why;
  EXPECT_NE(why.find("gpipe 8", over), std::string::npos) << why;
}

TEST(AutoSchedule, ImpossibleLimitSaysWhatWouldFit) {
  const std::string message = input_error_message([] { choose_auto_schedule(4, 8, 2, 0.1); });
  EXPECT_NE(message.find("0.1"), std::string::npos) << message;
  EXPECT_NE(message.find("smallest any candidate needs is 1 (v-half)"), std::string::npos) << message;
}

TEST(AutoSchedule, RejectsBadArguments) {
  EXPECT_NE(input_error_message([] { choose_auto_schedule(0, 8, 1, 0.0); }).find("at least 1 stage"),
            std::string::npos);
  EXPECT_NE(input_error_message([] { choose_auto_schedule(4, 8, 0, 0.0); }).find("max_chunks"), std::string::npos);
  EXPECT_NE(input_error_message([] { choose_auto_schedule(4, 8, 1, -1.0); }).find("memory limit"),
            std::string::npos);
}

}  // namespace
}  // namespace trident
