// Re-planning from measured costs (schedule.replan): which schedule, on which split of the layers,
// would run the measured step fastest. The schedule candidates keep the running schedule's chunk
// placement: one chunk per rank chooses among gpipe, 1f1b and zb-h1; a V among zb-v, v-half and
// dualpipev, whose list scheduler orders the actions for the given costs (unequal stages
// included). Each is simulated on the running split with the measured costs and, where layers may
// move, on the split that balances the measured costs (plan/rebalance.hpp) with the costs it
// would have. Candidates whose simulated activation peak exceeds the memory limit are left out.
// Pure: every rank given the same costs reaches the same decision.
#pragma once

#include <string>
#include <vector>

#include "plan/partition.hpp"
#include "schedule/schedule.hpp"

namespace trident {

// How much longer a virtual stage's slowest rank takes than its fastest (its TP and DP peers), by
// the sum of their F, B, I and W means, and which world rank that is. From kStragglerFactor on,
// re-planning treats the stage as that much slower per layer (a straggler), and may move layers off it.
struct StageSlowdown {
  double factor = 1.0;
  int slowest_rank = -1;
};
inline constexpr double kStragglerFactor = 1.10;  // trident-post stragglers' default threshold too

struct ReplanOptions {
  double memory_limit = 0.0;       // in micro-batches of a whole stage (0 = p, 1F1B's)
  double activation_budget = 0.5;  // v-half's
  double threshold = 0.05;         // the fraction of the running step time a candidate must save
  // The running split of the layers (one entry per virtual stage) when layers may move; empty when
  // they stay (one virtual stage, emulated stages whose costs do not follow their layers).
  std::vector<StageLayers> movable_partition;
  // One per virtual stage, or empty (no stage slower than its peers). The measured costs are the
  // slowest ranks'.
  std::vector<StageSlowdown> slowdowns;
};

struct ReplanDecision {
  Schedule best;                      // the fastest candidate that fits (the running schedule when none beats it)
  std::vector<StageLayers> moved_to;  // best's split of the layers when it moves them; empty when they stay
  double running_time = 0.0;          // simulated step time of the running schedule with the measured costs
  double best_time = 0.0;             // of `best`
  bool switches = false;              // best beats the running schedule by more than the threshold
  std::string summary;                // every candidate's simulated time, for the log
};

ReplanDecision replan(const Schedule& running, const ActionCosts& measured, const ReplanOptions& options);

}  // namespace trident
