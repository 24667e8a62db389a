// The schedule part of `trident plan`: the deck's schedule made from its keys, the action costs
// that simulations of it use, a table comparing every schedule kind for the deck's p and m, and
// the diagram of the deck's own schedule. (plan/report.hpp prints the rest of the plan; plan
// cannot depend on this module, so the CLI prints both.)
#pragma once

#include <ostream>

#include "deck/config.hpp"
#include "schedule/schedule.hpp"

namespace trident {

// The schedule the deck runs: make_schedule(kind, pp, microbatches, virtual_stages), or for
// "auto" choose_auto_schedule(pp, microbatches, virtual_stages as the most chunks,
// auto_memory_limit). Throws InputError naming the deck file, schedule.kind and what to change
// when the combination has no schedule.
Schedule deck_schedule(const Deck& deck);

// Per-action costs for simulating a schedule with `chunks` chunks per rank on the deck's model:
//   [emulate] enabled: its fixed times, in ms, for every virtual stage alike (what the run sleeps);
//   otherwise: F of each virtual stage = its forward FLOPs (plan/partition.hpp's cost model, the
//   deck's partition with `chunks` chunks per rank) in units of the cheapest virtual stage's
//   forward, B = 2F (input and weight gradient each cost about a forward), I = W = F.
// Messages are free.
// A deck's explicit stage_layers list that does not have pp * chunks entries is replaced by the
// uniform split (so that other chunk counts can be compared).
ActionCosts deck_action_costs(const Deck& deck, int chunks);

// A table of every schedule kind that can run the deck's p and m: gpipe, 1f1b, zb-h1,
// interleaved-1f1b with v = max(2, the deck's virtual_stages) and auto (naming its choice), with
// the simulated bubble (deck_action_costs), the bubble simulated with equal stages, the textbook
// bubble, the peak micro-batches in flight on the first and the last rank, and rank 0's
// activation memory (plan/memory.hpp's stash per micro-batch x its peak in flight). The deck's
// kind is marked '*'. Kinds that cannot run the deck's p and m are listed under it with the reason.
void print_schedule_table(std::ostream& out, const Deck& deck);

// The deck's schedule (deck_schedule) drawn by render_schedule over its simulated timeline
// (deck_action_costs). Throws InputError like deck_schedule.
void print_schedule_diagram(std::ostream& out, const Deck& deck, int width = 120);

}  // namespace trident
