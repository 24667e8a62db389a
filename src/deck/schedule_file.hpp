// schedule.kind = "file": the deck's schedule read from schedule.file (a CSV action list per
// pipeline rank, schedule/csv_schedule.hpp) as the deck is loaded, after the values are read and
// before the relations between keys are checked, so that every fault names the key and the file.
#pragma once

#include "deck/config.hpp"
#include "deck/locations.hpp"

namespace trident {

// Reads and validates the file into deck.schedule.from_file: its rows must be parallel.pp, its
// chunks per rank schedule.virtual_stages and its micro-batches schedule.microbatches. Throws
// InputError naming the key, the file, and for a fault in the file its row and action. A
// schedule.file with another kind is an error too (it would be ignored).
void read_schedule_file(Deck& deck, const KeyLocations& where);

}  // namespace trident
