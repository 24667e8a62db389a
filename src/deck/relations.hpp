// Validation rules that relate several keys (divisibility, partitions, data files, ...).
#pragma once

#include "deck/config.hpp"
#include "deck/locations.hpp"

namespace trident {

// Throws InputError at the key most likely to be wrong when the deck is inconsistent.
void check_relations(const Deck& deck, const KeyLocations& where);

}  // namespace trident
