// find_schedule_problem: proves a schedule well-formed, complete and deadlock-free, or names the
// first thing wrong in one sentence. The executor trusts any list that passes, so the checks are
// about what would make ranks hang or gradients wrong, not about efficiency.
#include <string>
#include <vector>

#include "schedule/dependencies.hpp"
#include "schedule/schedule.hpp"

namespace trident {
namespace {

std::string number(int value) { return std::to_string(value); }

struct Placement {
  int rank = -1, chunk = -1;
};

// The table's shape, and that it places every virtual stage 0 .. p·v − 1 exactly once.
std::string shape_problem(const Schedule& schedule) {
  const int p = schedule.stages, v = schedule.chunks;
  if (p < 1 || schedule.microbatches < 1 || v < 1) {
    return "the schedule needs at least 1 stage, 1 micro-batch and 1 chunk per rank, but has p = " +
           number(p) + ", m = " + number(schedule.microbatches) + ", v = " + number(v) + ".";
  }
  if (static_cast<int>(schedule.actions.size()) != p) {
    return "the schedule has " + number(p) + " stages but action lists for " +
           number(static_cast<int>(schedule.actions.size())) + " ranks.";
  }
  if (static_cast<int>(schedule.virtual_stage.size()) != p) {
    return "the schedule has " + number(p) + " stages but virtual_stage rows for " +
           number(static_cast<int>(schedule.virtual_stage.size())) + " ranks.";
  }
  std::vector<Placement> placement(p * v);
  for (int rank = 0; rank < p; ++rank) {
    const std::vector<int>& row = schedule.virtual_stage[rank];
    if (static_cast<int>(row.size()) != v) {
      return "rank " + number(rank) + " places " + number(static_cast<int>(row.size())) +
             " chunks in virtual_stage, but the schedule has " + number(v) + " chunks per rank.";
    }
    for (int chunk = 0; chunk < v; ++chunk) {
      const int stage = row[chunk];
      if (stage < 0 || stage >= p * v) {
        return "rank " + number(rank) + " puts chunk " + number(chunk) + " at virtual stage " + number(stage) +
               ", outside 0.." + number(p * v - 1) + ".";
      }
      if (placement[stage].rank >= 0) {
        return "virtual stage " + number(stage) + " is placed twice (rank " + number(placement[stage].rank) +
               " chunk " + number(placement[stage].chunk) + " and rank " + number(rank) + " chunk " +
               number(chunk) + ").";
      }
      placement[stage] = {rank, chunk};
    }
  }
  return "";
}

// Every (micro-batch, chunk) of every rank: one F, and one B or else one I followed by one W (F
// alone in a forward-only schedule).
std::string completeness_problem(const Schedule& schedule) {
  const int m = schedule.microbatches, v = schedule.chunks;
  for (int rank = 0; rank < schedule.stages; ++rank) {
    const std::vector<Action>& list = schedule.actions[rank];
    const std::string who = "rank " + number(rank);
    // position[kind][chunk·m + j]: index of that action in the list (−1: absent).
    std::vector<std::vector<int>> position(4, std::vector<int>(m * v, -1));
    for (int index = 0; index < static_cast<int>(list.size()); ++index) {
      const Action& action = list[index];
      const std::string name = to_string(action, v) + " (its action " + number(index) + ")";
      if (action.microbatch < 0 || action.microbatch >= m) {
        return who + " runs " + name + " on micro-batch " + number(action.microbatch) +
               ", but the schedule has micro-batches 0.." + number(m - 1) + ".";
      }
      if (action.chunk < 0 || action.chunk >= v) {
        return who + " runs " + name + " on chunk " + number(action.chunk) + ", but the schedule has chunks 0.." +
               number(v - 1) + ".";
      }
      int& slot = position[static_cast<int>(action.kind)][action.chunk * m + action.microbatch];
      if (slot >= 0) {
        return who + " runs " + to_string(action, v) + " twice (its actions " + number(slot) + " and " +
               number(index) + ").";
      }
      slot = index;
    }
    for (int chunk = 0; chunk < v; ++chunk) {
      for (int j = 0; j < m; ++j) {
        const auto at = [&](ActionKind kind) { return position[static_cast<int>(kind)][chunk * m + j]; };
        const auto name = [&](ActionKind kind) { return to_string(Action{kind, j, chunk}, v); };
        const int f = at(ActionKind::forward), b = at(ActionKind::backward);
        const int i = at(ActionKind::input_grad), w = at(ActionKind::weight_grad);
        if (f < 0) return who + " never runs " + name(ActionKind::forward) + ".";
        if (schedule.forward_only) {
          if (b < 0 && i < 0 && w < 0) continue;
          return who + " runs " +
                 name(b >= 0   ? ActionKind::backward
                      : i >= 0 ? ActionKind::input_grad
                               : ActionKind::weight_grad) +
                 ", but a forward-only schedule runs no backward.";
        }
        if (b >= 0 && (i >= 0 || w >= 0)) {
          return who + " runs " + name(ActionKind::backward) + " and also " +
                 name(i >= 0 ? ActionKind::input_grad : ActionKind::weight_grad) +
                 ", but a micro-batch's backward is either one B or one I and one W.";
        }
        if (b < 0 && i < 0 && w < 0) {
          return who + " never runs the backward of " + name(ActionKind::forward) + " (" +
                 name(ActionKind::backward) + ", or " + name(ActionKind::input_grad) + " and " +
                 name(ActionKind::weight_grad) + ").";
        }
        if (b < 0 && w < 0) {
          return who + " runs " + name(ActionKind::input_grad) + " but never " + name(ActionKind::weight_grad) + ".";
        }
        if (b < 0 && i < 0) {
          return who + " runs " + name(ActionKind::weight_grad) + " but never " + name(ActionKind::input_grad) + ".";
        }
        if (b < 0 && w < i) {
          return who + " runs " + name(ActionKind::weight_grad) + " (its action " + number(w) + ") before " +
                 name(ActionKind::input_grad) + " (its action " + number(i) +
                 "), but a weight gradient needs the input gradient's pass first.";
        }
      }
    }
  }
  return "";
}

// Why `rank` stopped in the walk: its own F comes later in its list, or it receives a message
// whose sender is stopped itself (or comes later in its own list).
std::string stopped_rank_problem(const LoweredSchedule& lowered, const ScheduleWalk& walk, int rank, int chunks) {
  const auto stuck_at = [&](int who) {
    const StepOp& op = lowered[who][walk.stopped_at[who]];
    return to_string(op.action, chunks) + " (its action " + number(op.action_index) + ")";
  };
  const StepOp& op = lowered[rank][walk.stopped_at[rank]];
  const auto forward_ran = [&] {
    for (int i = 0; i < walk.stopped_at[rank]; ++i) {
      const Action& done = lowered[rank][i].action;
      if (lowered[rank][i].kind == OpKind::compute && done.kind == ActionKind::forward &&
          done.chunk == op.action.chunk && done.microbatch == op.action.microbatch)
        return true;
    }
    return false;
  };
  if (needs_own_forward(op.action.kind) && !forward_ran()) {
    return "deadlock: rank " + number(rank) + " is stuck at " + stuck_at(rank) + ", waiting for its own " +
           to_string(Action{ActionKind::forward, op.action.microbatch, op.action.chunk}, chunks) +
           ", which comes later in its list.";
  }
  const std::string where =
      op.peer == rank ? "which comes later in its own list" : "which is itself stuck at " + stuck_at(op.peer);
  return "deadlock: rank " + number(rank) + " is stuck at " + stuck_at(rank) + ", waiting for the " +
         direction_name(op.direction) + " of micro-batch " + number(op.action.microbatch) + " from virtual stage " +
         number(op.peer_virtual_stage) + " on rank " + number(op.peer) + ", " + where + ".";
}

// Walks the lowered schedule with unit costs (dependencies.hpp): if ranks stop before all are done,
// the first stopped rank names what it waits for.
std::string deadlock_problem(const Schedule& schedule) {
  const LoweredSchedule lowered = lower_schedule(schedule);
  const ScheduleWalk walk = walk_schedule(lowered, [](int, const StepOp&) { return 1.0; }, 0.0);
  for (int rank = 0; rank < schedule.stages; ++rank) {
    if (walk.stopped_at[rank] < static_cast<int>(lowered[rank].size()))
      return stopped_rank_problem(lowered, walk, rank, schedule.chunks);
  }
  return "";
}

}  // namespace

std::string find_schedule_problem(const Schedule& schedule) {
  if (std::string problem = shape_problem(schedule); !problem.empty()) return problem;
  if (std::string problem = completeness_problem(schedule); !problem.empty()) return problem;
  return deadlock_problem(schedule);
}

}  // namespace trident
