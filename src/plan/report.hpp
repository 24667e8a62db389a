// `trident plan`: what a deck will cost before anything runs (DESIGN.md "Command line").
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "deck/config.hpp"

namespace trident {

// Prints the model shape, parameter counts (total, non-embedding), the stage partition (layers,
// contents, compute and parameters per virtual stage, and each rank's chunks when the schedule
// interleaves), tokens and FLOPs per step, the schedule and its theoretical bubble, memory per
// pipeline rank, and the rank layout of the TP x PP x DP grid, for a world of `ranks` ranks.
// When ranks differs from tp * pp * dp but is a multiple of tp * pp, the plan uses
// dp = ranks / (tp * pp) and says so; otherwise it throws InputError naming --ranks, parallel.tp
// and parallel.pp and the valid rank counts. `notes` are printed under the grid line (the CLI
// says there what schedule.kind = "auto" chose). Schedule simulations are not part of it (see
// plan/schedule_report.hpp).
void print_plan(std::ostream& out, const Deck& deck, int ranks, const std::vector<std::string>& notes = {});

}  // namespace trident
