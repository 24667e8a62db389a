// data.path and eval.path as the deck gives them -> the files a run reads (DESIGN.md "Token
// data"): after the values are read, before the relations between keys are checked, so that a
// pattern matching nothing or a missing file fails at the key that named it.
#pragma once

#include "deck/config.hpp"
#include "deck/locations.hpp"

namespace trident {

// bin and text: every entry is a file or a glob pattern (*, ?, [...]); the files are read in sorted
// order as one stream (repeats dropped). megatron: every entry is the prefix of a .bin/.idx pair,
// also read in sorted order. Synthetic data reads no files. Throws InputError naming the key.
void resolve_token_paths(Deck& deck, const KeyLocations& where);

}  // namespace trident
