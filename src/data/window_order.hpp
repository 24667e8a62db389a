// Which window each sequence of the run reads (DESIGN.md "Token data"). Sequence g (counted over
// the whole run: step s, global batch G, sequence j reads g = (s - 1)·G + j) falls in epoch
// e = g / N at position i = g mod N of N windows. In order, it reads window i; shuffled
// (data.shuffle), window π_e(i), where π_e is a permutation of [0, N) drawn from (seed, e).
//
// π_e is a 4-round Feistel network on the smallest even number of bits that covers N, walked
// until it lands below N: a bijection computed in O(1) memory and time per window, so that any
// rank can find any window of any epoch without storing a permutation of a large corpus. It is a
// pure function of (g, N, seed): the same on every grid, and a resumed run, which knows its step,
// reads exactly the windows the uninterrupted run would have.
#pragma once

#include <array>
#include <cstdint>

namespace trident {

class WindowOrder {
 public:
  WindowOrder(std::int64_t windows, bool shuffle, std::uint64_t seed);

  std::int64_t window(std::int64_t sequence) const;
  std::int64_t epoch(std::int64_t sequence) const { return sequence / windows_; }
  bool shuffled() const { return shuffle_; }

 private:
  std::int64_t permuted(std::int64_t position, std::int64_t epoch) const;

  std::int64_t windows_;
  bool shuffle_;
  std::uint64_t seed_;
  int half_bits_;  // each Feistel half has this many bits
};

}  // namespace trident
