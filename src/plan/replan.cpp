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

// Per virtual stage: its straggler's slowness (kStragglerFactor or more), else 1.
std::vector<double> straggler_slowness(const std::vector<StageSlowdown>& slowdowns, std::size_t stages) {
  std::vector<double> slowness(stages, 1.0);
  for (std::size_t vs = 0; vs < std::min(stages, slowdowns.size()); ++vs)
    if (slowdowns[vs].factor >= kStragglerFactor) slowness[vs] = slowdowns[vs].factor;
  return slowness;
}

// "; stage 0's world rank 2 takes 1.62x as long as its peers": why the layers may move.
std::string stragglers_text(const std::vector<StageSlowdown>& slowdowns, const std::vector<double>& slowness) {
  std::string text;
  for (std::size_t vs = 0; vs < slowness.size(); ++vs) {
    if (slowness[vs] == 1.0) continue;
    char line[128];
    std::snprintf(line, sizeof line, "; stage %zu's world rank %d takes %.2fx as long as its peers", vs,
                  slowdowns[vs].slowest_rank, slowness[vs]);
    text += line;
  }
  return text;
}

// The split that balances the measured costs, its stragglers' slowness counted, simulated with
// the costs it would have.
void consider_moving_layers(ReplanDecision& decision, const Schedule& running, const ActionCosts& measured,
                            const ReplanOptions& options, double limit) {
  const std::vector<StageLayers>& partition = options.movable_partition;
  const std::vector<double> slowness = straggler_slowness(options.slowdowns, partition.size());
  ActionCosts at_peer_speed = measured;  // what the stages would cost at their peers' speed
  for (std::size_t vs = 0; vs < partition.size(); ++vs) {
    ActionCosts::Stage& stage = at_peer_speed.per_virtual_stage[vs];
    const double s = slowness[vs];
    stage = {stage.forward / s, stage.backward / s, stage.input_grad / s, stage.weight_grad / s};
  }
  const LayerCosts fit = fit_layer_costs(partition, at_peer_speed);
  const std::vector<StageLayers> balanced =
      measured_balanced_partition(fit, partition.back().end_layer(), static_cast<int>(partition.size()), slowness);
  decision.summary += stragglers_text(options.slowdowns, slowness);
  if (balanced == partition) return;
  const ActionCosts predicted = predicted_action_costs(fit, balanced, measured.p2p_latency, slowness);
  std::vector<Schedule> schedules = candidates(running, predicted, options.activation_budget);
  if (schedules.empty()) schedules.push_back(running);
  decision.summary += "; layers " + layer_counts_text(partition) + " moved to " + layer_counts_text(balanced);
  consider(decision, std::move(schedules), predicted, limit, running, balanced);
}

}  // namespace

ReplanDecision replan(const Schedule& running, const ActionCosts& measured, const ReplanOptions& options) {
  const double limit = options.memory_limit > 0.0 ? options.memory_limit : static_cast<double>(running.stages);
  ReplanDecision decision;
  decision.best = running;
  decision.running_time = decision.best_time = simulate(running, measured).step_time;
  decision.summary = word_of(running.kind) + " (running) " + seconds_text(decision.running_time);
  consider(decision, candidates(running, measured, options.activation_budget), measured, limit, running, {});
  if (options.movable_partition.size() >= 2) consider_moving_layers(decision, running, measured, options, limit);
  decision.switches = decision.best_time < decision.running_time * (1.0 - options.threshold);
  if (!decision.switches) {
    decision.best = running;
    decision.moved_to.clear();
  }
  return decision;
}

}  // namespace trident
