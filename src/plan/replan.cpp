#include "plan/replan.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/error.hpp"
#include "plan/rebalance.hpp"

namespace trident {
namespace {

// The kinds re-planning may switch to: those of the running kind's placement and chunk rule, made
// for the measured costs.
std::vector<Schedule> candidates(const Schedule& running, const ActionCosts& costs, double activation_budget) {
  if (running.kind == ScheduleKind::file) return {};  // a file's schedule has no kin to switch to
  const ScheduleType& now = schedule_type(running.kind);
  const ScheduleRequest request{running.stages, running.microbatches, running.chunks, activation_budget, &costs};
  std::vector<Schedule> schedules;
  for (const ScheduleType& type : schedule_types()) {
    const bool alike = type.placement == now.placement && type.chunks == now.chunks;
    if (type.in_replan && alike && runs_on(type, request.stages, request.microbatches, request.chunks))
      schedules.push_back(make_schedule(type.kind, request));
  }
  return schedules;
}

double activation_peak(const SimulatedStep& step, int chunks) {
  return static_cast<double>(*std::max_element(step.peak_in_flight.begin(), step.peak_in_flight.end())) / chunks;
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g s", seconds);
  return text;
}

// Simulates `schedules` with `costs` on the split `partition` (empty: the running one), listing
// each in the summary but the running schedule itself, and keeps the fastest that fits.
void consider(ReplanDecision& decision, std::vector<Schedule> schedules, const ActionCosts& costs, double limit,
              const Schedule& running, const std::vector<StageLayers>& partition) {
  for (Schedule& candidate : schedules) {
    const SimulatedStep step = simulate(candidate, costs);
    const bool fits = activation_peak(step, candidate.chunks) <= limit + 1e-9;
    if (!partition.empty() || candidate.kind != running.kind || candidate.actions != running.actions)
      decision.summary += ", " + word_of(candidate.kind) + " " + seconds_text(step.step_time) +
                          (fits ? "" : " (over the memory limit)");
    if (fits && step.step_time < decision.best_time) {
      decision.best_time = step.step_time;
      decision.best = std::move(candidate);
      decision.moved_to = partition;
    }
  }
}

}  // namespace

ReplanDecision replan(const Schedule& running, const ActionCosts& measured, const ReplanOptions& options) {
  const double limit = options.memory_limit > 0.0 ? options.memory_limit : static_cast<double>(running.stages);
  ReplanDecision decision;
  decision.best = running;
  decision.running_time = decision.best_time = simulate(running, measured).step_time;
  decision.summary = word_of(running.kind) + " (running) " + seconds_text(decision.running_time);
  consider(decision, candidates(running, measured, options.activation_budget), measured, limit, running, {});
  if (const std::vector<StageLayers>& partition = options.movable_partition; partition.size() >= 2) {
    const LayerCosts fit = fit_layer_costs(partition, measured);
    const std::vector<StageLayers> balanced =
        measured_balanced_partition(fit, partition.back().end_layer(), static_cast<int>(partition.size()));
    if (balanced != partition) {
      const ActionCosts predicted = predicted_action_costs(fit, balanced, measured.p2p_latency);
      std::vector<Schedule> schedules = candidates(running, predicted, options.activation_budget);
      if (schedules.empty()) schedules.push_back(running);
      decision.summary += "; layers " + layer_counts_text(partition) + " moved to " + layer_counts_text(balanced);
      consider(decision, std::move(schedules), predicted, limit, running, balanced);
    }
  }
  decision.switches = decision.best_time < decision.running_time * (1.0 - options.threshold);
  if (!decision.switches) {
    decision.best = running;
    decision.moved_to.clear();
  }
  return decision;
}

}  // namespace trident
