// The generators against schedules written down by hand from the papers' figures, at p = 4 (the
// golden files beside these are regression snapshots of the generators' own output; these are the
// reference). Micro-batches are numbered from 0 here, from 1 in the papers.
//   GPipe (Huang et al. 2019, fig. 2c): every forward, then every backward. The figure runs the
//     backwards from the last micro-batch; trident, like PyTorch's ScheduleGPipe, from the first,
//     which has the same bubble and frees the oldest activations first.
//   1F1B (Narayanan et al. 2021, fig. 4 top; PipeDream-Flush): rank r runs p − 1 − r warm-up
//     forwards, then alternates one forward and one backward, then drains the backwards.
//   ZB-H1 (Qi et al. 2023, fig. 3): 1F1B with each backward split into I (input gradient, sent
//     upstream at once) and W (weight gradient); rank r runs each W r input gradients after its I
//     (rank 0 at once), so that the W fill the time in which 1F1B's later ranks wait.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "schedule/schedule.hpp"

namespace trident {
namespace {

// "F0 F1 B0" → actions on chunk 0.
std::vector<Action> by_hand(const std::string& text) {
  std::vector<Action> actions;
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    const char letter = word[0];
    const ActionKind kind = letter == 'F'   ? ActionKind::forward
                            : letter == 'B' ? ActionKind::backward
                            : letter == 'I' ? ActionKind::input_grad
                                            : ActionKind::weight_grad;
    actions.push_back(Action{kind, std::stoi(word.substr(1)), 0});
  }
  return actions;
}

void expect_ranks(ScheduleKind kind, int m, const std::vector<std::string>& ranks) {
  const Schedule schedule = make_schedule(kind, static_cast<int>(ranks.size()), m, 1);
  ASSERT_EQ(schedule.actions.size(), ranks.size());
  for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
    EXPECT_EQ(schedule.actions[rank], by_hand(ranks[rank])) << word_of(kind) << ", rank " << rank;
  }
}

TEST(PaperSchedule, GpipeAtFourStages) {
  expect_ranks(
      ScheduleKind::gpipe, 4,
      {"F0 F1 F2 F3 B0 B1 B2 B3", "F0 F1 F2 F3 B0 B1 B2 B3", "F0 F1 F2 F3 B0 B1 B2 B3", "F0 F1 F2 F3 B0 B1 B2 B3"});
}

TEST(PaperSchedule, OneForwardOneBackwardAtFourStages) {
  expect_ranks(ScheduleKind::one_f_one_b, 8,
               {"F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7", "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
                "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7", "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"});
}

TEST(PaperSchedule, ZeroBubbleH1AtFourStages) {
  expect_ranks(ScheduleKind::zb_h1, 8,
               {"F0 F1 F2 F3 I0 W0 F4 I1 W1 F5 I2 W2 F6 I3 W3 F7 I4 W4 I5 W5 I6 W6 I7 W7",
                "F0 F1 F2 I0 F3 I1 W0 F4 I2 W1 F5 I3 W2 F6 I4 W3 F7 I5 W4 I6 W5 I7 W6 W7",
                "F0 F1 I0 F2 I1 F3 I2 W0 F4 I3 W1 F5 I4 W2 F6 I5 W3 F7 I6 W4 I7 W5 W6 W7",
                "F0 I0 F1 I1 F2 I2 F3 I3 W0 F4 I4 W1 F5 I5 W2 F6 I6 W3 F7 I7 W4 W5 W6 W7"});
}

// The figures' bubbles with F = 1, B = 2, I = W = 1: GPipe and 1F1B (p − 1)(F + B) idle per rank
// out of (m + p − 1)(F + B); ZB-H1 a third of that, (p − 1)·F, out of m(F + B) + (p − 1)·F.
TEST(PaperSchedule, SimulatedBubblesAreThePapers) {
  const ActionCosts costs = ActionCosts::uniform(4, 1);
  EXPECT_DOUBLE_EQ(simulate(make_schedule(ScheduleKind::gpipe, 4, 4, 1), costs).bubble, 3.0 / 7.0);
  EXPECT_DOUBLE_EQ(simulate(make_schedule(ScheduleKind::one_f_one_b, 4, 8, 1), costs).bubble, 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(simulate(make_schedule(ScheduleKind::zb_h1, 4, 8, 1), costs).bubble, 3.0 / 27.0);
}

}  // namespace
}  // namespace trident
