// The lowering of schedules to messages (schedule/messages.hpp) and its one dependency rule
// (schedule/dependencies.hpp).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "schedule/dependencies.hpp"
#include "schedule/messages.hpp"

namespace trident {
namespace {

std::string ops_text(const std::vector<StepOp>& ops) {
  std::string text;
  for (const StepOp& op : ops) {
    const std::string action = to_string(op.action, 1);
    if (op.kind == OpKind::compute) text += action + " ";
    if (op.kind == OpKind::recv) text += "recv(" + action + "<-" + std::to_string(op.peer) + ") ";
    if (op.kind == OpKind::send) text += "send(" + action + "->" + std::to_string(op.peer) + ") ";
  }
  return text;
}

TEST(Lowering, WrapsEachActionInItsMessages) {
  const LoweredSchedule lowered = lower_schedule(make_schedule(ScheduleKind::one_f_one_b, 2, 2, 1));
  EXPECT_EQ(ops_text(lowered[0]), "F0 send(F0->1) F1 send(F1->1) recv(B0<-1) B0 recv(B1<-1) B1 ");
  EXPECT_EQ(ops_text(lowered[1]), "recv(F0<-0) F0 B0 send(B0->0) recv(F1<-0) F1 B1 send(B1->0) ");
}

// Every SEND meets exactly one RECV on its peer: same tag, same direction, each naming the other.
TEST(Lowering, EverySendHasOneMatchingReceive) {
  for (const auto& [kind, p, m, v] :
       {std::tuple{ScheduleKind::one_f_one_b, 4, 8, 1}, std::tuple{ScheduleKind::zb_h1, 3, 5, 1},
        std::tuple{ScheduleKind::interleaved_1f1b, 2, 4, 2}, std::tuple{ScheduleKind::interleaved_1f1b, 1, 2, 2}}) {
    const LoweredSchedule lowered = lower_schedule(make_schedule(kind, p, m, v));
    std::map<int, std::pair<int, const StepOp*>> sends, receives;  // by tag: (rank, op)
    for (int rank = 0; rank < p; ++rank) {
      for (const StepOp& op : lowered[rank]) {
        if (op.kind == OpKind::compute) continue;
        auto& table = op.kind == OpKind::send ? sends : receives;
        EXPECT_TRUE(table.emplace(op.tag, std::pair{rank, &op}).second)
            << word_of(kind) << ": tag " << op.tag << " twice";
      }
    }
    ASSERT_EQ(sends.size(), receives.size()) << word_of(kind);
    for (const auto& [tag, send] : sends) {
      ASSERT_TRUE(receives.count(tag)) << word_of(kind) << ": tag " << tag << " is sent, never received";
      const auto& [receiver, receive] = receives.at(tag);
      EXPECT_EQ(send.second->peer, receiver) << word_of(kind);
      EXPECT_EQ(receive->peer, send.first) << word_of(kind);
      EXPECT_EQ(receive->direction, send.second->direction) << word_of(kind);
      EXPECT_EQ(receive->action.microbatch, send.second->action.microbatch) << word_of(kind);
    }
  }
}

// A RECV waits for its SEND plus the latency between ranks; compute ops take their duration.
TEST(Dependencies, ReceiveWaitsForItsSendAndTheLatency) {
  const LoweredSchedule lowered = lower_schedule(make_schedule(ScheduleKind::gpipe, 2, 1, 1));
  const ScheduleWalk walk = walk_schedule(lowered, [](int, const StepOp& op) {
    return op.action.kind == ActionKind::forward ? 1.0 : 2.0;
  }, 0.5);
  ASSERT_TRUE(walk.complete(lowered));
  // rank 1: recv(F0) at 1.5, F0 1.5..2.5, B0 2.5..4.5, send at 4.5; rank 0: B0 from 5.0 to 7.0.
  EXPECT_DOUBLE_EQ(walk.times[1][0].end, 1.5);
  EXPECT_DOUBLE_EQ(walk.times[1][2].end, 4.5);
  EXPECT_DOUBLE_EQ(walk.times[0].back().start, 5.0);
  EXPECT_DOUBLE_EQ(walk.times[0].back().end, 7.0);
}

TEST(Dependencies, AReceiveWhoseSendNeverRunsStopsItsRank) {
  Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, 2, 1, 1);
  std::swap(schedule.actions[0][0], schedule.actions[0][1]);  // rank 0: B0 before F0
  const LoweredSchedule lowered = lower_schedule(schedule);
  const ScheduleWalk walk = walk_schedule(lowered, [](int, const StepOp&) { return 1.0; }, 0.0);
  EXPECT_FALSE(walk.complete(lowered));
  EXPECT_EQ(walk.stopped_at, (std::vector<int>{0, 0}));  // each at the receive of what the other never sends
}

}  // namespace
}  // namespace trident
