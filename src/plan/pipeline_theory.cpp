#include "plan/pipeline_theory.hpp"

#include <algorithm>
#include <cmath>

namespace trident {

double in_flight_microbatches(const ScheduleConfig& schedule, int stage, int stages) {
  const int m = schedule.microbatches;
  if (schedule.kind == ScheduleKind::file && schedule.from_file) {  // the file's own peaks
    const Schedule& file = *schedule.from_file;
    const SimulatedStep step = simulate(file, ActionCosts::uniform(file.virtual_stages(), file.chunks));
    return static_cast<double>(step.peak_in_flight[stage]) / file.chunks;
  }
  if (schedule.kind == ScheduleKind::automatic) {
    const double limit = schedule.auto_memory_limit > 0.0 ? schedule.auto_memory_limit : stages;
    return stages == 1 ? 1.0 : std::min(limit, static_cast<double>(m));
  }
  return schedule_type(schedule.kind)
      .peak_in_flight({stages, m, schedule.virtual_stages, schedule.activation_budget}, stage);
}

double theoretical_bubble(int stages, int microbatches, int chunks) {
  return static_cast<double>(stages - 1) / (static_cast<double>(chunks) * microbatches + stages - 1);
}

}  // namespace trident
