#include "schedule/replan.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/error.hpp"
#include "plan/partition.hpp"
#include "schedule/dualpipe_v.hpp"
#include "schedule/v_shape.hpp"

namespace trident {
namespace {

std::vector<Schedule> candidates(const Schedule& running, const ActionCosts& measured, double activation_budget) {
  const int p = running.stages, m = running.microbatches;
  std::vector<Schedule> schedules;
  if (chunk_placement(running.kind) == ChunkPlacement::v_shape) {
    for (const ScheduleKind kind : {ScheduleKind::zb_v, ScheduleKind::v_half})
      schedules.push_back(make_v_shape(kind, p, m, activation_budget, measured));
    if (m >= 2 * p) schedules.push_back(make_dualpipe_v(p, m));
  } else if (running.chunks == 1) {
    for (const ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zb_h1})
      schedules.push_back(make_schedule(kind, p, m, 1));
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

}  // namespace

ReplanDecision replan(const Schedule& running, const ActionCosts& measured, double memory_limit,
                      double activation_budget, double threshold) {
  const double limit = memory_limit > 0.0 ? memory_limit : static_cast<double>(running.stages);
  ReplanDecision decision;
  decision.best = running;
  decision.running_time = decision.best_time = simulate(running, measured).step_time;
  decision.summary = word_of(running.kind) + " (running) " + seconds_text(decision.running_time);
  for (Schedule& candidate : candidates(running, measured, activation_budget)) {
    const SimulatedStep step = simulate(candidate, measured);
    const bool fits = activation_peak(step, candidate.chunks) <= limit + 1e-9;
    if (candidate.kind != running.kind || candidate.actions != running.actions)
      decision.summary += ", " + word_of(candidate.kind) + " " + seconds_text(step.step_time) +
                          (fits ? "" : " (over the memory limit)");
    if (fits && step.step_time < decision.best_time) {
      decision.best_time = step.step_time;
      decision.best = std::move(candidate);
    }
  }
  decision.switches = decision.best_time < decision.running_time * (1.0 - threshold);
  if (!decision.switches) decision.best = running;
  return decision;
}

}  // namespace trident
