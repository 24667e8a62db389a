// `trident plan`: what a deck will cost before anything runs (DESIGN.md "Command line").
#pragma once

#include <ostream>

#include "deck/config.hpp"

namespace trident {

// Prints the model shape, parameter counts (total, non-embedding, per stage and TP rank), tokens
// and FLOPs per step, the schedule and its theoretical bubble, memory per rank for every stage,
// and the rank layout of the TP x PP x DP grid, for a world of `ranks` ranks.
// When ranks differs from tp * pp * dp but is a multiple of tp * pp, the plan uses
// dp = ranks / (tp * pp) and says so; otherwise it throws InputError naming --ranks, parallel.tp
// and parallel.pp and the valid rank counts.
void print_plan(std::ostream& out, const Deck& deck, int ranks);

}  // namespace trident
