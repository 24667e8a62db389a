// Ordered messages (schedule/message_order.hpp): tags ignored, one FIFO per pair of ranks and
// direction. Every generator's schedules pair their messages in posting order; a schedule whose
// receiver takes them in another order is named, though tagged messages would run it.
#include "schedule/message_order.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "schedule/schedule.hpp"

namespace trident {
namespace {

TEST(MessageOrder, EveryGeneratorPairsItsMessagesInPostingOrder) {
  int checked = 0;
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved_1f1b,
                            ScheduleKind::zb_h1, ScheduleKind::zb_v, ScheduleKind::v_half, ScheduleKind::dualpipe_v}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m : {1, p, p + 1, 2 * p, 3 * p + 1}) {
        for (int v = 1; v <= 3; ++v) {
          Schedule schedule;
          try {
            schedule = make_schedule(kind, p, m, v);
          } catch (const std::exception&) {
            continue;  // a combination the generator refuses
          }
          ASSERT_EQ(find_schedule_problem(schedule), "");
          EXPECT_EQ(find_message_order_problem(schedule), "")
              << word_of(kind) << " p " << p << " m " << m << " v " << v;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 150);
}

TEST(MessageOrder, AutoAndForwardOnlySchedulesToo) {
  for (int p = 2; p <= 8; p += 2) {
    const Schedule chosen = choose_auto_schedule(p, 2 * p, 2, 0.0);
    EXPECT_EQ(find_message_order_problem(chosen), "") << word_of(chosen.kind) << " p " << p;
    EXPECT_EQ(find_message_order_problem(forward_only_schedule(chosen)), "") << p;
  }
}

Action F(int j) { return {ActionKind::forward, j, 0}; }
Action B(int j) { return {ActionKind::backward, j, 0}; }

// Two ranks, one chunk each, the actions given; valid (the tagged walk finishes) by construction.
Schedule two_ranks(std::vector<Action> rank0, std::vector<Action> rank1) {
  Schedule schedule;
  schedule.stages = 2;
  schedule.microbatches = 2;
  schedule.virtual_stage = {{0}, {1}};
  schedule.actions = {std::move(rank0), std::move(rank1)};
  EXPECT_EQ(find_schedule_problem(schedule), "");
  return schedule;
}

TEST(MessageOrder, NamesTheChannelAndTheFirstMessagesThatDiffer) {
  // Rank 1 runs F1 before F0: with tags each forward finds its activation (rank 0 sends both
  // before waiting), but in posting order the first activation rank 0 sends is micro-batch 0's.
  const Schedule schedule = two_ranks({F(0), F(1), B(1), B(0)}, {F(1), B(1), F(0), B(0)});
  EXPECT_EQ(find_message_order_problem(schedule),
            "the activation channel from rank 0 to rank 1 is out of order: its 1st message is micro-batch 0 for "
            "virtual stage 1 (sent after F0), but rank 1's 1st receive on it waits for micro-batch 1 from virtual "
            "stage 0 (received by F1).");
}

TEST(MessageOrder, GradientsHaveTheirOwnChannel) {
  // The same swap on the way back: rank 1 sends B1's gradient first, rank 0 runs B0 first.
  const std::string problem = find_message_order_problem(two_ranks({F(0), F(1), B(0), B(1)}, {F(0), F(1), B(1), B(0)}));
  EXPECT_NE(problem.find("the gradient channel from rank 1 to rank 0 is out of order"), std::string::npos) << problem;
  EXPECT_NE(problem.find("its 1st message is micro-batch 1 for virtual stage 0 (sent after B1)"), std::string::npos)
      << problem;
}

}  // namespace
}  // namespace trident
