// choose_auto_schedule: "auto" picks, among the generated schedules (the V shapes too when two
// chunks per rank are allowed), the one with the lowest simulated bubble whose peak activation
// memory fits the limit. Uniform costs (F = 1, B = 2,
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
  double activation_budget = 0.5;  // v-half's
};

// A candidate that exists for (p, m), simulated with uniform costs.
struct Evaluated {
  std::string label;  // "zb-h1", "interleaved-1f1b v=2"
  Schedule schedule;
  double bubble = 0.0;
  double memory = 0.0;  // peak in-flight, in micro-batches of a whole stage
};

void check_arguments(int stages, int microbatches, int max_chunks, double memory_limit) {
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
}

// 0 means "what 1F1B holds": p micro-batches on its first rank.
double effective_limit(int stages, double memory_limit) {
  return memory_limit > 0.0 ? memory_limit : static_cast<double>(stages);
}

// The registry's auto candidates in their order of preference on a tie (simpler first), each with
// every chunk count its rule allows up to max_chunks. The budget of v-half is what the limit leaves
// (p stage micro-batches being all of 1F1B's).
std::vector<Candidate> auto_candidates(int stages, int max_chunks, double limit) {
  std::vector<const ScheduleType*> types;
  for (const ScheduleType& type : schedule_types())
    if (type.auto_preference > 0) types.push_back(&type);
  std::ranges::sort(types, {}, &ScheduleType::auto_preference);
  std::vector<Candidate> candidates;
  const double budget = std::min(1.0, limit / stages);
  for (const ScheduleType* type : types) {
    const int fewest = type->chunks == ChunkRule::one ? 1 : 2;
    const int most = type->chunks == ChunkRule::two_or_more ? max_chunks : fewest;
    for (int v = fewest; v <= std::min(most, max_chunks); ++v) candidates.push_back({type->kind, v, budget});
  }
  return candidates;
}

std::vector<Evaluated> evaluate_candidates(int stages, int microbatches, int max_chunks, double limit) {
  const std::vector<Candidate> candidates = auto_candidates(stages, max_chunks, limit);
  std::vector<Evaluated> evaluated;
  for (const Candidate& candidate : candidates) {
    Evaluated e;
    try {
      e.schedule = make_schedule(candidate.kind, stages, microbatches, candidate.chunks, candidate.activation_budget);
    } catch (const InputError&) {
      continue;  // e.g. interleaved-1f1b when m is not a multiple of p: not a candidate here
    }
    const int v = candidate.chunks;
    const SimulatedStep step = simulate(e.schedule, ActionCosts::uniform(stages * v, v));
    // A chunk holds 1/v of a stage's layers, so v in-flight chunks weigh one stage micro-batch.
    e.memory = static_cast<double>(*std::max_element(step.peak_in_flight.begin(), step.peak_in_flight.end())) / v;
    e.bubble = step.bubble;
    const bool several_chunk_counts = schedule_type(candidate.kind).chunks == ChunkRule::two_or_more;
    e.label = word_of(candidate.kind) + (several_chunk_counts ? " v=" + std::to_string(v) : "");
    evaluated.push_back(std::move(e));
  }
  return evaluated;
}

// The index of the lowest bubble within the limit (ties: the earlier); -1 when none fits.
int best_fitting(const std::vector<Evaluated>& evaluated, double limit) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(evaluated.size()); ++i) {
    if (evaluated[i].memory > limit + 1e-9) continue;
    // Strictly lower by more than rounding noise, so that ties go to the earlier candidate.
    if (best < 0 || evaluated[i].bubble < evaluated[best].bubble - 1e-12) best = i;
  }
  return best;
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * fraction);
  return text;
}

}  // namespace

Schedule choose_auto_schedule(int stages, int microbatches, int max_chunks, double memory_limit) {
  check_arguments(stages, microbatches, max_chunks, memory_limit);
  const double limit = effective_limit(stages, memory_limit);
  std::vector<Evaluated> evaluated = evaluate_candidates(stages, microbatches, max_chunks, limit);
  const int best = best_fitting(evaluated, limit);
  if (best < 0) {
    const auto smallest = std::min_element(evaluated.begin(), evaluated.end(),
                                           [](const Evaluated& a, const Evaluated& b) { return a.memory < b.memory; });
    throw InputError("no pipeline schedule for p = " + std::to_string(stages) +
                     ", m = " + std::to_string(microbatches) + " fits the memory limit of " + format(limit) +
                     " stage micro-batches; the smallest any candidate needs is " + format(smallest->memory) + " (" +
                     smallest->label + "): raise the limit or name a schedule kind");
  }
  return std::move(evaluated[best].schedule);
}

std::string explain_auto_choice(int stages, int microbatches, int max_chunks, double memory_limit) {
  check_arguments(stages, microbatches, max_chunks, memory_limit);
  const double limit = effective_limit(stages, memory_limit);
  const std::vector<Evaluated> evaluated = evaluate_candidates(stages, microbatches, max_chunks, limit);
  const int best = best_fitting(evaluated, limit);
  if (best < 0) return "no candidate fits the memory limit of " + format(limit) + " stage micro-batches";
  const Evaluated& chosen = evaluated[best];
  std::vector<const Evaluated*> others;
  for (const Evaluated& e : evaluated)
    if (&e != &chosen) others.push_back(&e);
  std::ranges::stable_sort(others, {}, [](const Evaluated* e) { return e->bubble; });
  std::string fitting, over;
  for (const Evaluated* e : others) {
    const bool fits = e->memory <= limit + 1e-9;
    std::string& list = fits ? fitting : over;
    list += (list.empty() ? "" : ", ") + e->label + " " + (fits ? percent(e->bubble) : format(e->memory));
  }
  std::string text = chosen.label + ": the lowest simulated bubble, " + percent(chosen.bubble) + ", holding " +
                     format(chosen.memory) + " of the " + format(limit) + " stage micro-batches allowed";
  if (!fitting.empty()) text += "; others that fit: " + fitting;
  if (!over.empty()) text += "; over the limit (stage micro-batches): " + over;
  return text;
}

}  // namespace trident
