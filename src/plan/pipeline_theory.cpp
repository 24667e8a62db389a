#include "plan/pipeline_theory.hpp"

#include <algorithm>

namespace trident {

int in_flight_microbatches(const ScheduleConfig& schedule, int stage, int stages) {
  if (stages == 1) return 1;
  if (schedule.kind == "gpipe") return schedule.microbatches;
  return std::min(stages - stage, schedule.microbatches);
}

double theoretical_bubble(int stages, int microbatches) {
  return static_cast<double>(stages - 1) / (microbatches + stages - 1);
}

}  // namespace trident
