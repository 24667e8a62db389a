#include "plan/pipeline_theory.hpp"

#include <algorithm>

namespace trident {

double in_flight_microbatches(const ScheduleConfig& schedule, int stage, int stages) {
  const int m = schedule.microbatches;
  if (schedule.kind == ScheduleKind::gpipe) return m;
  if (stages == 1) return 1.0;
  if (schedule.kind == ScheduleKind::interleaved_1f1b) {
    const int v = schedule.virtual_stages;
    const int warm_up = 2 * (stages - stage - 1) + (v - 1) * stages;
    return static_cast<double>(std::min(warm_up + 1, m * v)) / v;
  }
  if (schedule.kind == ScheduleKind::automatic) {
    const double limit = schedule.auto_memory_limit > 0.0 ? schedule.auto_memory_limit : stages;
    return std::min(limit, static_cast<double>(m));
  }
  return std::min(stages - stage, m);
}

double theoretical_bubble(int stages, int microbatches, int chunks) {
  return static_cast<double>(stages - 1) / (static_cast<double>(chunks) * microbatches + stages - 1);
}

}  // namespace trident
