// The validator: each kind of broken schedule is caught, with a sentence that names the rank and
// the action. Broken schedules are made by editing good ones, so each test breaks one thing.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "schedule/schedule.hpp"

namespace trident {
namespace {

Action F(int j, int chunk = 0) { return {ActionKind::forward, j, chunk}; }
Action B(int j, int chunk = 0) { return {ActionKind::backward, j, chunk}; }
Action I(int j) { return {ActionKind::input_grad, j, 0}; }
Action W(int j) { return {ActionKind::weight_grad, j, 0}; }

// A hand-made schedule with one chunk per rank.
Schedule by_hand(int m, std::vector<std::vector<Action>> actions) {
  Schedule schedule;
  schedule.stages = static_cast<int>(actions.size());
  schedule.microbatches = m;
  for (int rank = 0; rank < schedule.stages; ++rank) schedule.virtual_stage.push_back({rank});
  schedule.actions = std::move(actions);
  return schedule;
}

void expect_problem(const Schedule& schedule, const std::vector<std::string>& fragments) {
  const std::string problem = find_schedule_problem(schedule);
  ASSERT_FALSE(problem.empty()) << "the validator accepted a broken schedule";
  for (const std::string& fragment : fragments) {
    EXPECT_NE(problem.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << problem;
  }
}

TEST(Validator, AcceptsAHandWrittenGoodSchedule) {
  EXPECT_EQ(find_schedule_problem(by_hand(2, {{F(0), F(1), B(0), B(1)}, {F(0), B(0), F(1), B(1)}})), "");
  EXPECT_EQ(find_schedule_problem(by_hand(1, {{F(0), I(0), W(0)}, {F(0), I(0), W(0)}})), "");
}

TEST(Validator, RejectsAMissingBackward) {
  Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, 2, 2, 1);
  std::vector<Action>& rank1 = schedule.actions[1];  // F0 B0 F1 B1
  rank1.pop_back();
  expect_problem(schedule, {"rank 1", "never runs the backward", "B1"});
}

TEST(Validator, RejectsAMissingForward) {
  Schedule schedule = make_schedule(ScheduleKind::gpipe, 2, 2, 1);
  schedule.actions[0].erase(schedule.actions[0].begin() + 1);  // drop F1
  expect_problem(schedule, {"rank 0", "never runs F1"});
}

TEST(Validator, RejectsADuplicatedForward) {
  Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, 3, 4, 1);
  schedule.actions[2].insert(schedule.actions[2].begin() + 2, F(0));
  expect_problem(schedule, {"rank 2", "F0 twice"});
}

TEST(Validator, RejectsWeightGradientBeforeItsInputGradient) {
  Schedule schedule = make_schedule(ScheduleKind::zb_h1, 2, 2, 1);
  // rank 0 is F0 F1 I0 W0 I1 W1: move W1 in front of I1.
  ASSERT_EQ(schedule.actions[0], (std::vector<Action>{F(0), F(1), I(0), W(0), I(1), W(1)}));
  std::swap(schedule.actions[0][4], schedule.actions[0][5]);
  expect_problem(schedule, {"rank 0", "W1", "before I1"});
}

TEST(Validator, RejectsInputGradientWithoutWeightGradient) {
  expect_problem(by_hand(1, {{F(0), I(0)}}), {"rank 0", "I0", "never W0"});
}

TEST(Validator, RejectsMixingWholeAndSplitBackward) {
  expect_problem(by_hand(1, {{F(0), B(0), W(0)}}), {"rank 0", "B0", "W0", "either one B or one I and one W"});
}

TEST(Validator, RejectsBadMicrobatchAndChunkIndices) {
  Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, 2, 8, 1);
  schedule.actions[1][0].microbatch = 9;
  expect_problem(schedule, {"rank 1", "F9", "micro-batches 0..7"});

  Schedule negative = make_schedule(ScheduleKind::one_f_one_b, 2, 8, 1);
  negative.actions[0][0].microbatch = -1;
  expect_problem(negative, {"rank 0", "micro-batch -1"});

  Schedule chunk = make_schedule(ScheduleKind::interleaved_1f1b, 2, 4, 2);
  chunk.actions[0][0].chunk = 2;
  expect_problem(chunk, {"rank 0", "chunk 2", "chunks 0..1"});
}

TEST(Validator, RejectsABrokenVirtualStageTable) {
  Schedule schedule = make_schedule(ScheduleKind::interleaved_1f1b, 2, 4, 2);
  schedule.virtual_stage[1][1] = 0;  // virtual stage 0 twice, 3 nowhere
  expect_problem(schedule, {"virtual stage 0", "placed twice"});

  Schedule rows = make_schedule(ScheduleKind::one_f_one_b, 2, 2, 1);
  rows.actions.pop_back();
  expect_problem(rows, {"2 stages", "action lists for 1 rank"});
}

// Rank 0 runs its backward before the forward whose activations it needs.
TEST(Validator, RejectsBackwardBeforeItsOwnForward) {
  Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, 2, 1, 1);  // both ranks: F0 B0
  std::swap(schedule.actions[0][0], schedule.actions[0][1]);
  expect_problem(schedule, {"deadlock", "rank 0 is stuck at B0", "its own F0"});
}

// Rank 0 waits for B0's gradient before sending F1; rank 1 waits for F1 before running B0.
TEST(Validator, RejectsTwoRanksWaitingOnEachOther) {
  const Schedule schedule = by_hand(2, {{F(0), B(0), F(1), B(1)}, {F(0), F(1), B(0), B(1)}});
  expect_problem(schedule, {"deadlock", "rank 0 is stuck at B0 (its action 1)", "gradient of micro-batch 0",
                            "rank 1, which is itself stuck at F1 (its action 1)"});
}

// The same kind of cycle across chunks. Rank 1 moves F0.0 (virtual stage 1) to the end of its
// list: rank 0's F0.1 (stage 2) waits for it, while rank 1 first reaches F0.1 (stage 3), which
// waits for rank 0's F0.1.
TEST(Validator, RejectsADeadlockBetweenChunks) {
  Schedule schedule = make_schedule(ScheduleKind::interleaved_1f1b, 2, 2, 2);
  std::vector<Action>& rank1 = schedule.actions[1];
  ASSERT_EQ(rank1.front(), F(0, 0));
  rank1.erase(rank1.begin());
  rank1.push_back(F(0, 0));
  expect_problem(schedule, {"deadlock", "rank 0 is stuck at F0.1", "activation of micro-batch 0",
                            "virtual stage 1 on rank 1",
                            "itself stuck at F0.1 (its action 1)"});
}

// Evaluation's schedule: every generator's forward half validates, runs F alone, and keeps the
// training's chunk placement; a backward in it is caught.
TEST(ForwardOnlySchedule, EveryGeneratorsForwardHalfIsValid) {
  const std::vector<std::pair<ScheduleKind, int>> kinds = {{ScheduleKind::gpipe, 1},
                                                          {ScheduleKind::one_f_one_b, 1},
                                                          {ScheduleKind::zb_h1, 1},
                                                          {ScheduleKind::interleaved_1f1b, 2},
                                                          {ScheduleKind::interleaved_1f1b, 3}};
  for (const auto& [kind, chunks] : kinds) {
    for (int p : {1, 2, 4}) {
      const Schedule training = make_schedule(kind, p, 2 * p, chunks);
      const Schedule eval = forward_only_schedule(training);
      SCOPED_TRACE(word_of(kind) + " p " + std::to_string(p) + " v " + std::to_string(chunks));
      EXPECT_TRUE(eval.forward_only);
      EXPECT_EQ(find_schedule_problem(eval), "");
      EXPECT_EQ(eval.virtual_stage, training.virtual_stage);
      for (const std::vector<Action>& list : eval.actions) {
        EXPECT_EQ(static_cast<int>(list.size()), 2 * p * chunks);
        for (const Action& action : list) EXPECT_EQ(action.kind, ActionKind::forward);
      }
    }
  }
}

TEST(ForwardOnlySchedule, ABackwardInItIsRejected) {
  Schedule eval = forward_only_schedule(make_schedule(ScheduleKind::one_f_one_b, 2, 2, 1));
  eval.actions[1].push_back(B(0));
  expect_problem(eval, {"rank 1", "B0", "forward-only"});
}

}  // namespace
}  // namespace trident
