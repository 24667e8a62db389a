#include "plan/pipeline_theory.hpp"

#include <algorithm>
#include <cmath>

namespace trident {

double in_flight_microbatches(const ScheduleConfig& schedule, int stage, int stages) {
  const int m = schedule.microbatches;
  if (schedule.kind == ScheduleKind::gpipe) return m;
  if (schedule.kind == ScheduleKind::dualpipe_v) return std::min(2 * stages + 1, 2 * m) / 2.0;
  if (stages == 1) return 1.0;
  if (schedule.kind == ScheduleKind::interleaved_1f1b) {
    const int v = schedule.virtual_stages;
    const int warm_up = 2 * (stages - stage - 1) + (v - 1) * stages;
    return static_cast<double>(std::min(warm_up + 1, m * v)) / v;
  }
  if (chunk_placement(schedule.kind) == ChunkPlacement::v_shape) {  // zb-v, v-half: dualpipev above
    const int cap = v_shape_activation_cap(schedule.kind, stages, schedule.activation_budget);
    return std::min(cap, 2 * m) / 2.0;
  }
  if (schedule.kind == ScheduleKind::automatic) {
    const double limit = schedule.auto_memory_limit > 0.0 ? schedule.auto_memory_limit : stages;
    return std::min(limit, static_cast<double>(m));
  }
  return std::min(stages - stage, m);
}

int v_shape_activation_cap(ScheduleKind kind, int stages, double activation_budget) {
  const double budget = kind == ScheduleKind::zb_v ? 1.0 : activation_budget;
  return std::max(2, static_cast<int>(std::ceil(budget * 2 * stages - 1e-9)));
}

double theoretical_bubble(int stages, int microbatches, int chunks) {
  return static_cast<double>(stages - 1) / (static_cast<double>(chunks) * microbatches + stages - 1);
}

}  // namespace trident
