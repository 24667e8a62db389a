#include "deck/values.hpp"

#include "deck/messages.hpp"

namespace trident {

std::int64_t read_integer(const toml::node& node, const KeySite& site, std::int64_t min, std::int64_t max) {
  const auto* integer = node.as_integer();
  if (integer == nullptr) site.fail("must be an integer, got " + describe(node));
  const std::int64_t value = **integer;
  if (value < min) site.fail("must be at least " + std::to_string(min) + ", got " + std::to_string(value));
  if (value > max) site.fail("must be at most " + std::to_string(max) + ", got " + std::to_string(value));
  return value;
}

std::string Interval::describe() const {
  if (std::isinf(high)) return (low_open ? "greater than " : "at least ") + format_number(low);
  return "in " + std::string(low_open ? "(" : "[") + format_number(low) + ", " + format_number(high) +
         (high_open ? ")" : "]");
}

double read_real(const toml::node& node, const KeySite& site, const Interval& allowed) {
  double value = 0.0;
  if (const auto* integer = node.as_integer()) {
    value = static_cast<double>(**integer);
  } else if (const auto* real = node.as_floating_point()) {
    value = **real;
  } else {
    site.fail("must be a number " + allowed.describe() + ", got " + describe(node));
  }
  if (!std::isfinite(value)) {
    site.fail("must be a finite number " + allowed.describe() + ", got " + format_number(value));
  }
  if (!allowed.contains(value)) site.fail("must be " + allowed.describe() + ", got " + format_number(value));
  return value;
}

const std::string& read_string(const toml::node& node, const KeySite& site) {
  const auto* string = node.as_string();
  if (string == nullptr) site.fail("must be a string (in quotes), got " + describe(node));
  return **string;
}

}  // namespace trident
