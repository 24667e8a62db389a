#include "data/window_order.hpp"

#include <stdexcept>

namespace trident {

namespace {

constexpr int kRounds = 4;

std::uint64_t mix(std::uint64_t z) {  // SplitMix64's finaliser
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

WindowOrder::WindowOrder(std::int64_t windows, bool shuffle, std::uint64_t seed)
    : windows_(windows), shuffle_(shuffle), seed_(seed), half_bits_(1) {
  if (windows < 1) throw std::invalid_argument("WindowOrder: needs at least one window");
  while ((std::int64_t{1} << (2 * half_bits_)) < windows) ++half_bits_;
}

std::int64_t WindowOrder::window(std::int64_t sequence) const {
  const std::int64_t position = sequence % windows_;
  return shuffle_ ? permuted(position, epoch(sequence)) : position;
}

std::int64_t WindowOrder::permuted(std::int64_t position, std::int64_t epoch) const {
  const std::uint64_t mask = (std::uint64_t{1} << half_bits_) - 1;
  std::array<std::uint64_t, kRounds> keys{};
  for (int r = 0; r < kRounds; ++r) keys[r] = mix(seed_ ^ mix(static_cast<std::uint64_t>(epoch) * kRounds + r));
  auto x = static_cast<std::uint64_t>(position);
  do {  // cycle-walking: the network permutes [0, 4^half_bits), at most 4N; repeat until below N
    std::uint64_t left = x >> half_bits_, right = x & mask;
    for (const std::uint64_t key : keys) {
      const std::uint64_t next = left ^ (mix(right ^ key) & mask);
      left = right;
      right = next;
    }
    x = (left << half_bits_) | right;
  } while (x >= static_cast<std::uint64_t>(windows_));
  return static_cast<std::int64_t>(x);
}

}  // namespace trident
