// Generators: the rules each one follows, the combinations each rejects (with a message naming the
// rule), and that every schedule they make for a sweep of (p, m, v) passes the validator.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "schedule/schedule.hpp"
#include "test_util.hpp"

namespace trident {
namespace {

using testing::input_error_message;

const std::vector<ScheduleKind> kGenerators = {ScheduleKind::gpipe, ScheduleKind::one_f_one_b,
                                               ScheduleKind::interleaved_1f1b, ScheduleKind::zb_h1};

TEST(ScheduleKinds, ListsGeneratorsThenAutoAndFile) {
  std::vector<std::string> words;
  for (const auto& [kind, word] : choices(ScheduleKind{})) words.emplace_back(word);
  EXPECT_EQ(words, (std::vector<std::string>{"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-v", "v-half",
                                             "dualpipev", "auto", "file"}));
}

TEST(ActionNames, LettersAndChunkSuffix) {
  EXPECT_EQ(action_letter(ActionKind::forward), 'F');
  EXPECT_EQ(action_letter(ActionKind::backward), 'B');
  EXPECT_EQ(action_letter(ActionKind::input_grad), 'I');
  EXPECT_EQ(action_letter(ActionKind::weight_grad), 'W');
  EXPECT_EQ(to_string(Action{ActionKind::forward, 3, 0}, 1), "F3");
  EXPECT_EQ(to_string(Action{ActionKind::backward, 0, 0}, 1), "B0");
  EXPECT_EQ(to_string(Action{ActionKind::input_grad, 2, 1}, 2), "I2.1");
  EXPECT_EQ(to_string(Action{ActionKind::weight_grad, 12, 0}, 3), "W12.0");
}

// The sweep the brief asks for: p in {1,2,3,4,8}, m in {1, p−1, p, 2p+1, 3p}, and v in {2, 3} for
// interleaved. Anything a generator accepts must validate; anything it rejects must be an
// InputError naming the rule it broke.
TEST(Generators, EverySweptScheduleIsValidOrRejectedWithTheRule) {
  int valid = 0, rejected = 0;
  for (const ScheduleKind kind : kGenerators) {
    for (int p : {1, 2, 3, 4, 8}) {
      for (int m : {1, p - 1, p, 2 * p + 1, 3 * p}) {
        if (m < 1) continue;
        const std::vector<int> chunk_counts =
            kind == ScheduleKind::interleaved_1f1b ? std::vector<int>{2, 3} : std::vector<int>{1};
        for (int v : chunk_counts) {
          SCOPED_TRACE(word_of(kind) + " p=" + std::to_string(p) + " m=" + std::to_string(m) +
                       " v=" + std::to_string(v));
          const bool expect_rejection = kind == ScheduleKind::interleaved_1f1b && m % p != 0;
          if (expect_rejection) {
            const std::string message = input_error_message([&] { make_schedule(kind, p, m, v); });
            EXPECT_NE(message.find("multiple of the pipeline stages"), std::string::npos) << message;
            ++rejected;
            continue;
          }
          const Schedule schedule = make_schedule(kind, p, m, v);
          EXPECT_EQ(schedule.kind, kind);
          EXPECT_EQ(schedule.stages, p);
          EXPECT_EQ(schedule.microbatches, m);
          EXPECT_EQ(schedule.chunks, v);
          ASSERT_EQ(static_cast<int>(schedule.actions.size()), p);
          EXPECT_EQ(find_schedule_problem(schedule), "");
          ++valid;
        }
      }
    }
  }
  EXPECT_GT(valid, 80);
  EXPECT_GT(rejected, 10);
}

TEST(Generators, VirtualStageTableIsFilled) {
  const Schedule one_chunk = make_schedule(ScheduleKind::one_f_one_b, 4, 8, 1);
  ASSERT_EQ(one_chunk.virtual_stage.size(), 4u);
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(one_chunk.virtual_stage[rank], std::vector<int>{rank});

  const Schedule interleaved = make_schedule(ScheduleKind::interleaved_1f1b, 4, 8, 3);
  ASSERT_EQ(interleaved.virtual_stage.size(), 4u);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(interleaved.virtual_stage[rank], (std::vector<int>{rank, 4 + rank, 8 + rank}));
    for (int chunk = 0; chunk < 3; ++chunk) {
      EXPECT_EQ(interleaved.rank_of(chunk * 4 + rank), rank);
      EXPECT_EQ(interleaved.chunk_of(chunk * 4 + rank), chunk);
    }
  }
  EXPECT_EQ(interleaved.virtual_stages(), 12);
  EXPECT_NE(input_error_message([&] { interleaved.rank_of(12); }).find("virtual stage 12"), std::string::npos);
}

TEST(Generators, OnlyZeroBubbleSplitsTheBackward) {
  EXPECT_TRUE(make_schedule(ScheduleKind::zb_h1, 4, 8, 1).splits_backward());
  EXPECT_FALSE(make_schedule(ScheduleKind::one_f_one_b, 4, 8, 1).splits_backward());
  EXPECT_FALSE(make_schedule(ScheduleKind::gpipe, 4, 8, 1).splits_backward());
  EXPECT_FALSE(make_schedule(ScheduleKind::interleaved_1f1b, 4, 8, 2).splits_backward());
}

TEST(Generators, OneFOneBWarmsUpWithPMinusRankMinusOneForwards) {
  for (int m : {1, 2, 3, 8}) {
    const Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, 4, m, 1);
    for (int rank = 0; rank < 4; ++rank) {
      const std::vector<Action>& list = schedule.actions[rank];
      const auto first_backward = std::find_if(list.begin(), list.end(), [](const Action& a) {
        return a.kind == ActionKind::backward;
      });
      // Warm-up forwards plus the first steady-state forward (when there is one) precede B0.
      const int forwards_before = static_cast<int>(first_backward - list.begin());
      EXPECT_EQ(forwards_before, std::min(4 - rank, m)) << "m=" << m << " rank " << rank;
    }
  }
}

TEST(Generators, GpipeRunsAllForwardsThenAllBackwards) {
  const Schedule schedule = make_schedule(ScheduleKind::gpipe, 3, 5, 1);
  for (const std::vector<Action>& list : schedule.actions) {
    ASSERT_EQ(list.size(), 10u);
    for (int j = 0; j < 5; ++j) {
      EXPECT_EQ(list[j], (Action{ActionKind::forward, j, 0}));
      EXPECT_EQ(list[5 + j], (Action{ActionKind::backward, j, 0}));
    }
  }
}

// ZB-H1 keeps 1F1B's order of forwards and input gradients and only moves the W's.
TEST(Generators, ZeroBubbleH1Is1F1BWithWeightGradientsMoved) {
  for (int p : {1, 2, 4, 5}) {
    for (int m : {1, 3, 8, 11}) {
      const Schedule one_f_one_b = make_schedule(ScheduleKind::one_f_one_b, p, m, 1);
      const Schedule zb = make_schedule(ScheduleKind::zb_h1, p, m, 1);
      for (int rank = 0; rank < p; ++rank) {
        std::vector<Action> without_w;
        int weights = 0;
        for (const Action& action : zb.actions[rank]) {
          if (action.kind == ActionKind::weight_grad) {
            EXPECT_EQ(action.microbatch, weights++) << "W's run oldest first";
            continue;
          }
          Action as_1f1b = action;
          if (as_1f1b.kind == ActionKind::input_grad) as_1f1b.kind = ActionKind::backward;
          without_w.push_back(as_1f1b);
        }
        EXPECT_EQ(without_w, one_f_one_b.actions[rank]) << "p=" << p << " m=" << m << " rank " << rank;
        EXPECT_EQ(weights, m);
      }
    }
  }
}

TEST(Generators, RejectsChunksOutsideTheirRule) {
  for (const ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zb_h1}) {
    const std::string message = input_error_message([&] { make_schedule(kind, 4, 8, 2); });
    EXPECT_NE(message.find("one chunk per rank"), std::string::npos) << message;
  }
  for (int v : {0, 1}) {
    const std::string message = input_error_message([&] { make_schedule(ScheduleKind::interleaved_1f1b, 4, 8, v); });
    EXPECT_NE(message.find("at least 2 chunks"), std::string::npos) << message;
  }
}

TEST(Generators, AutoIsNotAGenerator) {
  EXPECT_THROW(make_schedule(ScheduleKind::automatic, 4, 8, 1), std::logic_error);
}

TEST(Generators, RejectsEmptyPipelines) {
  EXPECT_NE(input_error_message([] { make_schedule(ScheduleKind::one_f_one_b, 0, 8, 1); }).find("at least 1 stage"),
            std::string::npos);
  EXPECT_NE(
      input_error_message([] { make_schedule(ScheduleKind::one_f_one_b, 4, 0, 1); }).find("at least 1 micro-batch"),
      std::string::npos);
}

TEST(ActionCostsUniform, DividesAWholeStageByTheChunks) {
  const ActionCosts costs = ActionCosts::uniform(8, 2, 1.0, 2.0, 1.0, 1.0, 0.25);
  ASSERT_EQ(costs.per_virtual_stage.size(), 8u);
  for (const ActionCosts::Stage& stage : costs.per_virtual_stage) {
    EXPECT_DOUBLE_EQ(stage.forward, 0.5);
    EXPECT_DOUBLE_EQ(stage.backward, 1.0);
    EXPECT_DOUBLE_EQ(stage.input_grad, 0.5);
    EXPECT_DOUBLE_EQ(stage.weight_grad, 0.5);
  }
  EXPECT_DOUBLE_EQ(costs.p2p_latency, 0.25);
}

}  // namespace
}  // namespace trident
