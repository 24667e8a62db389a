// Refuses a run whose ranks cannot fit in their node's memory, before anything is allocated: a
// GPT-3 175B deck on one rank fails here with the plan's figure and the node's, not inside a
// 650 GB allocation.
#pragma once

#include <mpi.h>

#include "deck/config.hpp"

namespace trident {

// Collective over `world`. Each rank takes its planned memory (plan/memory.hpp: weights, gradients,
// AdamW moments, activations and workspace of its pipeline rank); the ranks sharing a node add
// theirs up. Throws InputError on that node's ranks when the sum exceeds the node's physical
// memory, naming both figures and what would make the run fit.
void check_memory_fits(const Deck& deck, MPI_Comm world);

}  // namespace trident
