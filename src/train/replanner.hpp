// Re-planning at step boundaries (schedule.replan): every rank measures the step's action times,
// all ranks agree on them, and plan/replan.hpp decides whether another schedule, or another split
// of the layers, would run them faster.
#pragma once

#include <mpi.h>

#include <vector>

#include "common/timeline_event.hpp"
#include "deck/config.hpp"
#include "plan/replan.hpp"
#include "schedule/schedule.hpp"

namespace trident {

// Whether to re-plan after `step`: "once" after the second step of this run (the first pays for
// first-touch page faults), "every N" after each step that is a multiple of N (from the second on).
bool replan_due(const ScheduleConfig& config, int first_step, int step);

struct MeasuredCosts {
  // Per virtual stage, its slowest rank's mean F, B, I and W: the replicas of a stage meet at
  // every gradient reduction and its TP ranks at every collective, so the slowest paces it.
  ActionCosts costs;
  std::vector<StageSlowdown> slowdowns;  // per virtual stage (plan/replan.hpp)
};

// Collective over `world`: every rank's mean F, B, I and W time of each of its virtual stages of
// `running` over its compute events of the step (B = I + W where the schedule splits the backward,
// I = W = B / 2 where it does not); per virtual stage the slowest rank's, and how much slower it is
// than the fastest rank there (by the sum of the four). The p2p latency is the shortest wait any
// rank had for a pipeline message. `events`: this rank's (world rank `world_rank`, pipeline rank
// `pp_rank`) events of the step.
MeasuredCosts measured_action_costs(MPI_Comm world, const Schedule& running, int world_rank, int pp_rank,
                                    const std::vector<TimelineEvent>& events);

}  // namespace trident
