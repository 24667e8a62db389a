// simulate: turns a valid schedule and per-action costs into a predicted timeline, step time,
// bubble and per-rank peak of micro-batches in flight. It is what `trident plan` and the "auto"
// choice rely on, and what the measured timeline is compared with.
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "schedule/dependencies.hpp"
#include "schedule/schedule.hpp"

namespace trident {
namespace {

double action_duration(const ActionCosts::Stage& stage, ActionKind kind) {
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

  const LoweredSchedule lowered = lower_schedule(schedule);
  const auto duration = [&](int rank, const StepOp& op) {
    return action_duration(costs.per_virtual_stage[schedule.virtual_stage[rank][op.action.chunk]], op.action.kind);
  };
  const ScheduleWalk walk = walk_schedule(lowered, duration, costs.p2p_latency);

  SimulatedStep step;
  double busy = 0.0;
  for (std::size_t rank = 0; rank < lowered.size(); ++rank) {
    step.per_rank.emplace_back();
    for (std::size_t i = 0; i < lowered[rank].size(); ++i) {
      const OpTimes& times = walk.times[rank][i];
      step.step_time = std::max(step.step_time, times.end);
      if (lowered[rank][i].kind != OpKind::compute) continue;
      step.per_rank[rank].push_back(TimedAction{lowered[rank][i].action, times.start, times.end});
      busy += times.end - times.start;
    }
  }
  step.bubble = step.step_time > 0.0 ? 1.0 - busy / (schedule.stages * step.step_time) : 0.0;
  for (const std::vector<Action>& list : schedule.actions) step.peak_in_flight.push_back(peak_in_flight(list));
  return step;
}

}  // namespace trident
