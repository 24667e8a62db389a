// model.family decides which keys a deck may give and the default of tie_embeddings (DESIGN.md "Deck"): after the
// values are read, before the relations between keys are checked.
#pragma once

#include <toml++/toml.h>

#include "deck/config.hpp"
#include "deck/locations.hpp"

namespace trident {

// `model_section`: the deck's [model] table, overrides applied. Throws InputError naming the key
// when the deck gives a key or a table ([model.moe]) only another family reads
// (FamilyDescription::own_keys), or a [model.moe] without its experts; sets tie_embeddings to the
// family's default unless the deck gives it.
void resolve_model_family(Deck& deck, const toml::table& model_section, const KeyLocations& where);

}  // namespace trident
