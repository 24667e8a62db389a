#include "deck/overrides.hpp"

#include "deck/locations.hpp"
#include "deck/tables.hpp"

namespace trident {

namespace {

std::string trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return std::string(text.substr(first, last - first + 1));
}

toml::table parse_value(const std::string& text) {
  try {
    toml::table parsed = toml::parse("value = " + text);
    if (parsed.size() == 1) return parsed;  // anything more is not one value: take it as text
  } catch (const toml::parse_error&) {
    // not TOML: a bare string
  }
  toml::table bare;
  bare.insert("value", text);
  return bare;
}

}  // namespace

Override parse_override(const std::string& assignment) {
  const std::string where = "--set " + assignment;
  const std::string form = "expected section.key=value, e.g. --set train.lr=3e-4 or --set model.moe.experts=8";
  const auto equals = assignment.find('=');
  if (equals == std::string::npos) fail_at(where, "missing '=value'; " + form);
  const std::string key = trimmed(std::string_view(assignment).substr(0, equals));
  // The section is everything before the last dot (model.moe); no part may be empty.
  const auto [section, name] = split_key(key);
  if (section.empty() || name.empty() || key.front() == '.' || key.find("..") != std::string::npos) {
    fail_at(where, "the key \"" + key + "\" is not of the form section.key; " + form);
  }
  return Override{assignment, std::string(section), std::string(name),
                  parse_value(trimmed(std::string_view(assignment).substr(equals + 1)))};
}

}  // namespace trident
