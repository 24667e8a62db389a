// Synthetic token data with learnable structure, for tests and demos without a data file.
#pragma once

#include <cstdint>
#include <vector>

namespace trident {

// `count` tokens in [0, vocab) from a noisy first-order Markov chain (see synthetic.cpp);
// the same (count, vocab, seed) always gives the same tokens, on every platform.
std::vector<std::int32_t> synthetic_tokens(std::int64_t count, int vocab, std::uint64_t seed);

// H(next | prev) of that chain in nats: the lowest mean loss a model that sees the previous
// token can reach (the unconditional entropy is log(vocab)).
double synthetic_conditional_entropy(int vocab);

}  // namespace trident
