// simulate: turns a valid schedule and per-action costs into a predicted timeline, step time,
// bubble and per-rank peak of micro-batches in flight. It is what `trident plan` and the "auto"
// choice rely on, and what the measured timeline is compared with.
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "schedule/schedule.hpp"

namespace trident {
namespace {

double duration(const ActionCosts::Stage& stage, ActionKind kind) {
  switch (kind) {
    case ActionKind::forward: return stage.forward;
    case ActionKind::backward: return stage.backward;
    case ActionKind::input_grad: return stage.input_grad;
    case ActionKind::weight_grad: return stage.weight_grad;
  }
  return 0.0;
}

void check_costs(const Schedule& schedule, const ActionCosts& costs) {
  const int expected = schedule.virtual_stages();
  if (static_cast<int>(costs.per_virtual_stage.size()) != expected) {
    throw InputError("action costs are given for " + std::to_string(costs.per_virtual_stage.size()) +
                     " virtual stages, but the schedule has " + std::to_string(expected) + " (p·v)");
  }
  if (costs.p2p_latency < 0.0) throw InputError("the p2p latency of the action costs must not be negative");
  for (const ActionCosts::Stage& stage : costs.per_virtual_stage) {
    if (stage.forward < 0.0 || stage.backward < 0.0 || stage.input_grad < 0.0 || stage.weight_grad < 0.0) {
      throw InputError("action costs must not be negative");
    }
  }
}

// Peak of (micro-batch, chunk) items in flight on one rank. An item is in flight from the start of
// its F (the forward allocates its activations as it runs) to the end of its B, or of its W when
// the backward is split (W still reads the stored activations). A rank runs one action at a time,
// so walking its list in order is exact; an item freed by a B ending at time t is not counted
// together with an F starting at t.
int peak_in_flight(const std::vector<Action>& list) {
  int in_flight = 0, peak = 0;
  for (const Action& action : list) {
    if (action.kind == ActionKind::forward) {
      peak = std::max(peak, ++in_flight);
    } else if (action.kind == ActionKind::backward || action.kind == ActionKind::weight_grad) {
      --in_flight;
    }
  }
  return peak;
}

}  // namespace

SimulatedStep simulate(const Schedule& schedule, const ActionCosts& costs) {
  if (const std::string problem = find_schedule_problem(schedule); !problem.empty()) {
    throw InputError("cannot simulate an invalid schedule: " + problem);
  }
  check_costs(schedule, costs);

  const int p = schedule.stages, m = schedule.microbatches, v = schedule.chunks;
  const int last = p * v - 1;
  std::vector<int> owner(p * v);
  for (int rank = 0; rank < p; ++rank) {
    for (int chunk = 0; chunk < v; ++chunk) owner[schedule.virtual_stage[rank][chunk]] = rank;
  }
  // End times per [virtual stage][micro-batch]; negative = not yet run. "gradient" = B or I, what
  // the previous virtual stage receives; "input" = I alone, what W waits for.
  std::vector<std::vector<double>> forward_end(p * v, std::vector<double>(m, -1.0));
  std::vector<std::vector<double>> gradient_end = forward_end, input_end = forward_end;

  SimulatedStep step;
  step.per_rank.assign(p, {});
  std::vector<double> rank_free(p, 0.0);
  std::vector<int> next(p, 0);

  // When the output of the action at (stage, j) that this one needs reaches `rank`; negative when
  // it has not run yet. Messages between ranks take p2p_latency; a chunk's hand-off to another
  // chunk on the same rank is free. The rules are the validator's (validate.cpp).
  const auto arrival = [&](const std::vector<std::vector<double>>& end, int stage, int j, int rank) {
    const double t = end[stage][j];
    if (t < 0.0) return -1.0;
    return owner[stage] == rank ? t : t + costs.p2p_latency;
  };
  const auto ready_time = [&](int rank, const Action& action) {
    const int s = schedule.virtual_stage[rank][action.chunk], j = action.microbatch;
    switch (action.kind) {
      case ActionKind::forward: return s == 0 ? 0.0 : arrival(forward_end, s - 1, j, rank);
      case ActionKind::backward:
      case ActionKind::input_grad: {
        const double own = forward_end[s][j];
        const double gradient = s == last ? 0.0 : arrival(gradient_end, s + 1, j, rank);
        return own < 0.0 || gradient < 0.0 ? -1.0 : std::max(own, gradient);
      }
      case ActionKind::weight_grad: return input_end[s][j];
    }
    return -1.0;
  };

  // Dependency-driven: run any rank whose next action has its inputs. The validator proved this
  // reaches the end; the times do not depend on the order in which ranks are visited.
  double busy = 0.0;
  for (bool progress = true; progress;) {
    progress = false;
    for (int rank = 0; rank < p; ++rank) {
      const std::vector<Action>& list = schedule.actions[rank];
      while (next[rank] < static_cast<int>(list.size())) {
        const Action& action = list[next[rank]];
        const double ready = ready_time(rank, action);
        if (ready < 0.0) break;
        const int s = schedule.virtual_stage[rank][action.chunk];
        TimedAction timed{action, std::max(rank_free[rank], ready), 0.0};
        timed.end = timed.start + duration(costs.per_virtual_stage[s], action.kind);
        busy += timed.end - timed.start;
        rank_free[rank] = timed.end;
        if (action.kind == ActionKind::forward) forward_end[s][action.microbatch] = timed.end;
        if (action.kind == ActionKind::backward || action.kind == ActionKind::input_grad) {
          gradient_end[s][action.microbatch] = timed.end;
        }
        if (action.kind == ActionKind::input_grad) input_end[s][action.microbatch] = timed.end;
        step.per_rank[rank].push_back(timed);
        ++next[rank];
        progress = true;
      }
    }
  }

  step.step_time = *std::max_element(rank_free.begin(), rank_free.end());
  step.bubble = step.step_time > 0.0 ? 1.0 - busy / (p * step.step_time) : 0.0;
  for (const std::vector<Action>& list : schedule.actions) step.peak_in_flight.push_back(peak_in_flight(list));
  return step;
}

}  // namespace trident
