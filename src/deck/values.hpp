// Readers of one TOML value with its checks (type, range), shared by the deck's keys
// (deck/schema.cpp) and the machine file's (predict/machine.cpp). Each throws InputError through
// KeySite::fail: "<location>: <key> must be ..., got ...".
#pragma once

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "deck/schema.hpp"

namespace trident {

// The largest TOML integer (int64) that fits `Int`.
template <class Int>
constexpr std::int64_t largest() {
  return static_cast<std::int64_t>(
      std::min<std::uint64_t>(std::numeric_limits<Int>::max(), std::numeric_limits<std::int64_t>::max()));
}

std::int64_t read_integer(const toml::node& node, const KeySite& site, std::int64_t min, std::int64_t max);

// An interval of allowed reals; `high` = infinity means unbounded above.
struct Interval {
  double low;
  bool low_open;
  double high = std::numeric_limits<double>::infinity();
  bool high_open = true;

  bool contains(double x) const { return (low_open ? x > low : x >= low) && (high_open ? x < high : x <= high); }
  std::string describe() const;
};
inline constexpr Interval kPositive{0.0, true};
inline constexpr Interval kNonNegative{0.0, false};
inline constexpr Interval kFraction{0.0, false, 1.0, true};  // Adam betas
inline constexpr Interval kShare{0.0, true, 1.0, false};     // (0, 1]

// An integer or a float, finite and in `allowed`.
double read_real(const toml::node& node, const KeySite& site, const Interval& allowed);

const std::string& read_string(const toml::node& node, const KeySite& site);

}  // namespace trident
