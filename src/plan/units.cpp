#include "plan/units.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>

namespace trident {
namespace {

// Scales `value` down by `base` until it is below one step, and prints it with two decimals and
// the matching unit (no decimals when no scaling happened, so small exact counts stay exact).
template <std::size_t N>
std::string scaled(double value, double base, const std::array<const char*, N>& units) {
  std::size_t unit = 0;
  while (unit + 1 < N && std::abs(value) >= base) {
    value /= base;
    ++unit;
  }
  char text[64];
  if (unit == 0) {
    std::snprintf(text, sizeof text, "%.0f%s%s", value, *units[0] ? " " : "", units[0]);
  } else {
    std::snprintf(text, sizeof text, "%.2f %s", value, units[unit]);
  }
  return text;
}

}  // namespace

std::string with_thousands(std::int64_t value) {
  const std::string digits = std::to_string(value < 0 ? -value : value);
  std::string text;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) text += ',';
    text += digits[i];
  }
  return value < 0 ? "-" + text : text;
}

std::string human_count(double count) {
  return scaled(count, 1000.0, std::array{"", "K", "M", "B", "T"});
}

std::string human_bytes(double bytes) {
  return scaled(bytes, 1024.0, std::array{"B", "KiB", "MiB", "GiB", "TiB", "PiB"});
}

std::string human_flops(double flops) {
  return scaled(flops, 1000.0, std::array{"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"});
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f%%", 100.0 * fraction);
  return text;
}

}  // namespace trident
