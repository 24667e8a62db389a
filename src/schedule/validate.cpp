// find_schedule_problem: proves a schedule well-formed, complete and deadlock-free, or names the
// first thing wrong in one sentence. The executor trusts any list that passes, so the checks are
// about what would make ranks hang or gradients wrong, not about efficiency.
#include <string>
#include <vector>

#include "schedule/schedule.hpp"

namespace trident {
namespace {

std::string number(int value) { return std::to_string(value); }

struct Placement {
  int rank = -1, chunk = -1;
};

// The table's shape, and that it places every virtual stage 0 .. p·v − 1 exactly once.
std::string shape_problem(const Schedule& schedule, std::vector<Placement>& placement) {
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
  placement.assign(p * v, Placement{});
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

// Every (micro-batch, chunk) of every rank: one F, and one B or else one I followed by one W.
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

// Runs every rank's list in order with dependencies only (sends never block; an action waits for
// the inputs it receives). If no rank can move before all are done, the schedule deadlocks.
// The dependency rules are the simulator's (simulate.cpp); keep the two in step.
std::string deadlock_problem(const Schedule& schedule, const std::vector<Placement>& placement) {
  const int p = schedule.stages, m = schedule.microbatches, v = schedule.chunks;
  const int last = p * v - 1;
  // forward_done / gradient_done [virtual stage][micro-batch]; "gradient" = B or I, what the
  // previous virtual stage receives.
  std::vector<std::vector<char>> forward_done(p * v, std::vector<char>(m, 0));
  std::vector<std::vector<char>> gradient_done = forward_done;
  std::vector<int> next(p, 0);

  const auto stage_of = [&](int rank, const Action& action) { return schedule.virtual_stage[rank][action.chunk]; };
  const auto ready = [&](int rank, const Action& action) {
    const int s = stage_of(rank, action), j = action.microbatch;
    switch (action.kind) {
      case ActionKind::forward: return s == 0 || forward_done[s - 1][j] != 0;
      case ActionKind::backward:
      case ActionKind::input_grad: return forward_done[s][j] && (s == last || gradient_done[s + 1][j]);
      case ActionKind::weight_grad: return gradient_done[s][j] != 0;
    }
    return false;
  };

  for (bool progress = true; progress;) {
    progress = false;
    for (int rank = 0; rank < p; ++rank) {
      const std::vector<Action>& list = schedule.actions[rank];
      while (next[rank] < static_cast<int>(list.size()) && ready(rank, list[next[rank]])) {
        const Action& action = list[next[rank]++];
        const int s = stage_of(rank, action);
        if (action.kind == ActionKind::forward) forward_done[s][action.microbatch] = 1;
        if (action.kind == ActionKind::backward || action.kind == ActionKind::input_grad) {
          gradient_done[s][action.microbatch] = 1;
        }
        progress = true;
      }
    }
  }

  const auto stuck_at = [&](int rank) {
    return to_string(schedule.actions[rank][next[rank]], v) + " (its action " + number(next[rank]) + ")";
  };
  for (int rank = 0; rank < p; ++rank) {
    if (next[rank] == static_cast<int>(schedule.actions[rank].size())) continue;
    const Action& action = schedule.actions[rank][next[rank]];
    const int s = stage_of(rank, action), j = action.microbatch;
    std::string waits_for;
    int source = -1;  // virtual stage whose output this action waits for
    if (action.kind == ActionKind::forward) {
      waits_for = "the activation of micro-batch " + number(j);
      source = s - 1;
    } else if (action.kind == ActionKind::weight_grad || !forward_done[s][j]) {
      const ActionKind own = action.kind == ActionKind::weight_grad ? ActionKind::input_grad : ActionKind::forward;
      return "deadlock: rank " + number(rank) + " is stuck at " + stuck_at(rank) + ", waiting for its own " +
             to_string(Action{own, j, action.chunk}, v) + ", which comes later in its list.";
    } else {
      waits_for = "the gradient of micro-batch " + number(j);
      source = s + 1;
    }
    const int other = placement[source].rank;
    std::string where = other == rank ? "which comes later in its own list"
                                      : "which is itself stuck at " + stuck_at(other);
    return "deadlock: rank " + number(rank) + " is stuck at " + stuck_at(rank) + ", waiting for " + waits_for +
           " from virtual stage " + number(source) + " on rank " + number(other) + ", " + where + ".";
  }
  return "";
}

}  // namespace

std::string find_schedule_problem(const Schedule& schedule) {
  std::vector<Placement> placement;
  if (std::string problem = shape_problem(schedule, placement); !problem.empty()) return problem;
  if (std::string problem = completeness_problem(schedule); !problem.empty()) return problem;
  return deadlock_problem(schedule, placement);
}

}  // namespace trident
