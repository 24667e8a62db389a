#include "schedule/dependencies.hpp"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <utility>

namespace trident {

bool needs_own_forward(ActionKind kind) { return kind == ActionKind::backward || kind == ActionKind::input_grad; }

bool ScheduleWalk::complete(const LoweredSchedule& lowered) const {
  for (std::size_t rank = 0; rank < lowered.size(); ++rank) {
    if (stopped_at[rank] != static_cast<int>(lowered[rank].size())) return false;
  }
  return true;
}

ScheduleWalk walk_schedule(const LoweredSchedule& lowered,
                           const std::function<double(int rank, const StepOp& op)>& duration, double p2p_latency) {
  const int ranks = static_cast<int>(lowered.size());
  ScheduleWalk walk;
  walk.times.assign(ranks, {});
  walk.stopped_at.assign(ranks, 0);
  std::vector<double> rank_free(ranks, 0.0);
  std::unordered_map<int, double> arrival;  // by tag: when the message can be received
  std::vector<std::set<std::pair<int, int>>> forwarded(ranks);  // per rank: (chunk, micro-batch) whose F ran

  // Run any rank whose next op can run, until none can; the times do not depend on the order in
  // which ranks are visited, since each op's start depends only on its own rank and its message.
  for (bool progress = true; progress;) {
    progress = false;
    for (int rank = 0; rank < ranks; ++rank) {
      const std::vector<StepOp>& ops = lowered[rank];
      for (int& next = walk.stopped_at[rank]; next < static_cast<int>(ops.size()); ++next) {
        const StepOp& op = ops[next];
        OpTimes times{rank_free[rank], rank_free[rank]};
        if (op.kind == OpKind::recv) {
          const auto message = arrival.find(op.tag);
          if (message == arrival.end()) break;
          times.start = times.end = std::max(rank_free[rank], message->second);
        } else if (op.kind == OpKind::compute) {
          const std::pair<int, int> item{op.action.chunk, op.action.microbatch};
          if (needs_own_forward(op.action.kind) && !forwarded[rank].count(item)) break;
          if (op.action.kind == ActionKind::forward) forwarded[rank].insert(item);
          times.end = times.start + duration(rank, op);
        } else {
          arrival[op.tag] = times.end + (op.peer == rank ? 0.0 : p2p_latency);
        }
        rank_free[rank] = times.end;
        walk.times[rank].push_back(times);
        progress = true;
      }
    }
  }
  return walk;
}

}  // namespace trident
