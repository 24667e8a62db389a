// choose_auto_schedule: "auto" picks, among the generated schedules, the one with the lowest
// simulated bubble whose peak activation memory fits the limit. Uniform costs (F = 1, B = 2,
// I = W = 1 per whole stage) are enough to rank the schedules' shapes before any real timing.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "schedule/schedule.hpp"

namespace trident {
namespace {

std::string format(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

struct Candidate {
  ScheduleKind kind;
  int chunks = 1;
};

}  // namespace

Schedule choose_auto_schedule(int stages, int microbatches, int max_chunks, double memory_limit) {
  if (stages < 1 || microbatches < 1) {
    throw InputError("schedule \"auto\" needs at least 1 stage and 1 micro-batch, got p = " +
                     std::to_string(stages) + ", m = " + std::to_string(microbatches));
  }
  if (max_chunks < 1) {
    throw InputError("schedule \"auto\" needs max_chunks >= 1 (chunks per rank it may try), got " +
                     std::to_string(max_chunks));
  }
  if (memory_limit < 0.0) {
    throw InputError("schedule \"auto\" needs a memory limit >= 0 (in micro-batches of a whole stage; 0 = p), got " +
                     format(memory_limit));
  }
  // 0 means "what 1F1B holds": p micro-batches on its first rank.
  const double limit = memory_limit > 0.0 ? memory_limit : static_cast<double>(stages);

  // In order of preference on a tie: simpler schedules first.
  std::vector<Candidate> candidates = {
      {ScheduleKind::gpipe, 1}, {ScheduleKind::one_f_one_b, 1}, {ScheduleKind::zb_h1, 1}};
  for (int v = 2; v <= max_chunks; ++v) candidates.push_back({ScheduleKind::interleaved_1f1b, v});

  bool found = false;
  Schedule best;
  double best_bubble = std::numeric_limits<double>::infinity();
  double smallest_memory = std::numeric_limits<double>::infinity();
  std::string smallest_kind;
  for (const Candidate& candidate : candidates) {
    Schedule schedule;
    try {
      schedule = make_schedule(candidate.kind, stages, microbatches, candidate.chunks);
    } catch (const InputError&) {
      continue;  // e.g. interleaved-1f1b when m is not a multiple of p: not a candidate here
    }
    const int v = candidate.chunks;
    const SimulatedStep step = simulate(schedule, ActionCosts::uniform(stages * v, v));
    // A chunk holds 1/v of a stage's layers, so v in-flight chunks weigh one stage micro-batch.
    const int peak = *std::max_element(step.peak_in_flight.begin(), step.peak_in_flight.end());
    const double memory = static_cast<double>(peak) / v;
    if (memory < smallest_memory) {
      smallest_memory = memory;
      smallest_kind = word_of(candidate.kind) + (v > 1 ? " with " + std::to_string(v) + " chunks" : "");
    }
    if (memory > limit + 1e-9) continue;
    // Strictly lower by more than rounding noise, so that ties go to the earlier candidate.
    if (!found || step.bubble < best_bubble - 1e-12) {
      found = true;
      best_bubble = step.bubble;
      best = std::move(schedule);
    }
  }
  if (!found) {
    throw InputError("no pipeline schedule for p = " + std::to_string(stages) + ", m = " +
                     std::to_string(microbatches) + " fits the memory limit of " + format(limit) +
                     " stage micro-batches; the smallest any candidate needs is " + format(smallest_memory) +
                     " (" + smallest_kind + "): raise the limit or name a schedule kind");
  }
  return best;
}

}  // namespace trident
