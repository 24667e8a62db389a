// The input deck: a TOML file (DESIGN.md, "Deck") turned into validated typed config.
//
// Everything a user can get wrong in a deck or a `--set` is rejected here, before any compute,
// with one InputError whose message names where (`file:line:` or `--set section.key=value:`),
// the key as `section.key`, what is wrong and what would be valid.
//
// Relative paths of input files (data.path, checkpoint.resume) are resolved against the deck
// file's directory, or against the working directory when they come from `--set`; the Deck holds
// the resolved paths. output.dir stays as written (relative to the working directory).
#pragma once

#include <string>
#include <vector>

#include "deck/config.hpp"

namespace trident {

// Reads the file at `path`, then does what parse_deck does. A missing or unreadable file is an
// InputError naming it.
Deck load_deck(const std::string& path, const std::vector<std::string>& overrides);

// Parses deck text, applies `overrides` ("section.key=value", from `--set`, later ones win) and
// validates. `source_name` stands for the file in messages, in Deck::path, and as the base of
// relative paths. Throws InputError.
Deck parse_deck(const std::string& text, const std::string& source_name,
                const std::vector<std::string>& overrides);

}  // namespace trident
