// Re-planning at step boundaries (schedule.replan): every rank measures the step's action times,
// all ranks agree on them, and plan/replan.hpp decides whether another schedule would run them
// faster.
#pragma once

#include <mpi.h>

#include <vector>

#include "common/timeline_event.hpp"
#include "deck/config.hpp"
#include "schedule/schedule.hpp"

namespace trident {

// Whether to re-plan after `step`: "once" after the second step of this run (the first pays for
// first-touch page faults), "every N" after each step that is a multiple of N (from the second on).
bool replan_due(const ScheduleConfig& config, int first_step, int step);

// Collective over `world`: the mean F, B, I and W time of every virtual stage of `running` over
// the compute events of the step on all ranks (B = I + W where the schedule splits the backward,
// I = W = B / 2 where it does not), and as the p2p latency the shortest wait any rank had for a
// pipeline message. `events`: this rank's (pipeline rank `pp_rank`) events of the step.
ActionCosts measured_action_costs(MPI_Comm world, const Schedule& running, int pp_rank,
                                  const std::vector<TimelineEvent>& events);

}  // namespace trident
