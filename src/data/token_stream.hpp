// The token data a run trains on, loaded whole into memory: one of the three kinds of
// DESIGN.md "Token data" ([data] kind = "bin" | "text" | "synthetic").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deck/config.hpp"

namespace trident {

struct TokenStream {
  std::vector<std::int32_t> tokens;
  std::string source;  // where the tokens came from, for messages and run records
};

// Loads the stream for `data`; every token is checked to be below `vocab` (model.vocab).
// `seed` (train.seed) drives the synthetic generator only. data.path is used as given: resolving
// it against the deck's directory is the caller's job. Throws InputError naming the file and
// the deck key for a missing, unreadable or malformed file.
TokenStream load_tokens(const DataConfig& data, int vocab, std::uint64_t seed);

}  // namespace trident
