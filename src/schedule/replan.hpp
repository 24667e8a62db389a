// Re-planning from measured costs (schedule.replan): which schedule would run the measured step
// fastest. The candidates keep the running schedule's chunk placement, so that no weight has to
// move: one chunk per rank chooses among gpipe, 1f1b and zb-h1; a V among zb-v and v-half, whose
// list scheduler orders the actions for the measured costs themselves (unequal stages included).
// Candidates whose simulated activation peak exceeds the memory limit are left out. Pure: every
// rank given the same costs reaches the same decision.
#pragma once

#include <string>

#include "schedule/schedule.hpp"

namespace trident {

struct ReplanDecision {
  Schedule best;              // the fastest candidate that fits (the running schedule when none beats it)
  double running_time = 0.0;  // simulated step time of the running schedule with the measured costs
  double best_time = 0.0;     // of `best`
  bool switches = false;      // best beats the running schedule by more than the threshold
  std::string summary;        // every candidate's simulated time, for the log
};

// memory_limit: in micro-batches of a whole stage (0 = p, 1F1B's); activation_budget: v-half's;
// threshold: the fraction of the running step time a candidate must save to be switched to.
ReplanDecision replan(const Schedule& running, const ActionCosts& measured, double memory_limit,
                      double activation_budget, double threshold);

}  // namespace trident
