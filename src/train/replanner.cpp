#include "train/replanner.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace trident {

namespace {

constexpr int kKinds = 4;  // F, B, I, W: EventKind::forward .. weight_grad

// This rank's mean time per virtual stage and kind ([stage * kKinds + kind]); -1 where it ran none.
std::vector<double> own_means(const Schedule& running, int pp_rank, const std::vector<TimelineEvent>& events) {
  const std::size_t slots = static_cast<std::size_t>(running.virtual_stages()) * kKinds;
  std::vector<double> seconds(slots, 0.0), counts(slots, 0.0), means(slots, -1.0);
  for (const TimelineEvent& e : events) {
    if (!is_compute(e.kind)) continue;
    const std::size_t slot =
        static_cast<std::size_t>(running.virtual_stage[pp_rank][e.chunk]) * kKinds + static_cast<std::size_t>(e.kind);
    seconds[slot] += e.t_end - e.t_start;
    counts[slot] += 1.0;
  }
  for (std::size_t slot = 0; slot < slots; ++slot)
    if (counts[slot] > 0) means[slot] = seconds[slot] / counts[slot];
  return means;
}

// F, B, I, W of one virtual stage from its four means, completed where the schedule ran only B or
// only I and W.
ActionCosts::Stage stage_costs(const double* mean, bool splits_backward) {
  const auto clean = [](double seconds) { return std::max(seconds, 0.0); };
  ActionCosts::Stage stage{clean(mean[0]), clean(mean[1]), clean(mean[2]), clean(mean[3])};
  if (splits_backward) {
    stage.backward = stage.input_grad + stage.weight_grad;
  } else {
    stage.input_grad = stage.weight_grad = stage.backward / 2;
  }
  return stage;
}

double total(const ActionCosts::Stage& stage) {
  return stage.forward + stage.backward + stage.input_grad + stage.weight_grad;
}

// Collective: per virtual stage, the world rank whose four means add up to the most.
std::vector<int> slowest_ranks(MPI_Comm world, const Schedule& running, const std::vector<double>& means,
                               int world_rank) {
  struct SecondsAndRank {  // MPI_DOUBLE_INT's layout
    double seconds;
    int rank;
  };
  std::vector<SecondsAndRank> mine;
  for (int stage = 0; stage < running.virtual_stages(); ++stage) {
    const double* mean = &means[static_cast<std::size_t>(stage) * kKinds];
    const bool holds_it = mean[0] >= 0;  // a rank of the stage runs its forwards
    mine.push_back({holds_it ? total(stage_costs(mean, running.splits_backward())) : -1.0, world_rank});
  }
  MPI_Allreduce(MPI_IN_PLACE, mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE_INT, MPI_MAXLOC, world);
  std::vector<int> ranks;
  for (const SecondsAndRank& slowest : mine) ranks.push_back(slowest.rank);
  return ranks;
}

}  // namespace

bool replan_due(const ScheduleConfig& config, int first_step, int step) {
  const int steps_run = step - first_step + 1;
  if (config.replan == ScheduleConfig::Replan::once) return steps_run == 2;
  if (config.replan == ScheduleConfig::Replan::every) return steps_run >= 2 && step % config.replan_every == 0;
  return false;
}

MeasuredCosts measured_action_costs(MPI_Comm world, const Schedule& running, int world_rank, int pp_rank,
                                    const std::vector<TimelineEvent>& events) {
  const std::vector<double> means = own_means(running, pp_rank, events);
  std::vector<double> slowest = means, fastest = means;  // ranks without a stage: -1, and +inf for the minimum
  for (double& mean : fastest)
    if (mean < 0) mean = std::numeric_limits<double>::infinity();
  MPI_Allreduce(MPI_IN_PLACE, slowest.data(), static_cast<int>(slowest.size()), MPI_DOUBLE, MPI_MAX, world);
  MPI_Allreduce(MPI_IN_PLACE, fastest.data(), static_cast<int>(fastest.size()), MPI_DOUBLE, MPI_MIN, world);
  double shortest_wait = std::numeric_limits<double>::infinity();
  for (const TimelineEvent& e : events)
    if (e.kind == EventKind::recv) shortest_wait = std::min(shortest_wait, e.t_end - e.t_start);
  MPI_Allreduce(MPI_IN_PLACE, &shortest_wait, 1, MPI_DOUBLE, MPI_MIN, world);
  const std::vector<int> slowest_rank = slowest_ranks(world, running, means, world_rank);

  MeasuredCosts measured;
  measured.costs.p2p_latency = std::isfinite(shortest_wait) ? shortest_wait : 0.0;
  for (int stage = 0; stage < running.virtual_stages(); ++stage) {
    const std::size_t at = static_cast<std::size_t>(stage) * kKinds;
    const ActionCosts::Stage slow = stage_costs(&slowest[at], running.splits_backward());
    const ActionCosts::Stage fast = stage_costs(&fastest[at], running.splits_backward());
    measured.costs.per_virtual_stage.push_back(slow);
    const double factor = total(fast) > 0 ? total(slow) / total(fast) : 1.0;
    measured.slowdowns.push_back({factor, slowest_rank[static_cast<std::size_t>(stage)]});
  }
  return measured;
}

}  // namespace trident
