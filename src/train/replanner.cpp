#include "train/replanner.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace trident {

namespace {

constexpr int kKinds = 4;  // F, B, I, W: EventKind::forward .. weight_grad

}  // namespace

bool replan_due(const ScheduleConfig& config, int first_step, int step) {
  const int steps_run = step - first_step + 1;
  if (config.replan == ScheduleConfig::Replan::once) return steps_run == 2;
  if (config.replan == ScheduleConfig::Replan::every) return steps_run >= 2 && step % config.replan_every == 0;
  return false;
}

ActionCosts measured_action_costs(MPI_Comm world, const Schedule& running, int pp_rank,
                                  const std::vector<TimelineEvent>& events) {
  const int stages = running.virtual_stages();
  // Per virtual stage and kind: summed seconds, then counts; all ranks of a stage (tp, dp) add in.
  std::vector<double> totals(2 * static_cast<std::size_t>(stages) * kKinds, 0.0);
  double shortest_wait = std::numeric_limits<double>::infinity();
  for (const TimelineEvent& e : events) {
    if (e.kind == EventKind::recv) shortest_wait = std::min(shortest_wait, e.t_end - e.t_start);
    if (!is_compute(e.kind)) continue;
    const int stage = running.virtual_stage[pp_rank][e.chunk];
    const std::size_t slot = static_cast<std::size_t>(stage) * kKinds + static_cast<std::size_t>(e.kind);
    totals[slot] += e.t_end - e.t_start;
    totals[stages * kKinds + slot] += 1.0;
  }
  MPI_Allreduce(MPI_IN_PLACE, totals.data(), static_cast<int>(totals.size()), MPI_DOUBLE, MPI_SUM, world);
  MPI_Allreduce(MPI_IN_PLACE, &shortest_wait, 1, MPI_DOUBLE, MPI_MIN, world);
  ActionCosts costs;
  costs.p2p_latency = std::isfinite(shortest_wait) ? shortest_wait : 0.0;
  for (int stage = 0; stage < stages; ++stage) {
    std::array<double, kKinds> mean{};
    for (int kind = 0; kind < kKinds; ++kind) {
      const double count = totals[(stages + stage) * kKinds + kind];
      mean[kind] = count > 0 ? totals[stage * kKinds + kind] / count : 0.0;
    }
    auto [forward, backward, input_grad, weight_grad] = mean;
    if (running.splits_backward()) {
      backward = input_grad + weight_grad;
    } else {
      input_grad = weight_grad = backward / 2;
    }
    costs.per_virtual_stage.push_back({forward, backward, input_grad, weight_grad});
  }
  return costs;
}

}  // namespace trident
