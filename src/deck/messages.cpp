#include "deck/messages.hpp"

#include <cmath>
#include <sstream>

namespace trident {

std::string format_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

namespace {

// A float as TOML writes it, so that 2.0 given for an integer does not read as "2".
std::string float_literal(double value) {
  std::string text = format_number(value);
  if (std::isfinite(value) && text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

}  // namespace

std::string in_quotes(std::string_view text) {
  std::string result;  // appended piecewise: GCC 12 warns falsely (-Wrestrict) on "\"" + s + "\""
  result.reserve(text.size() + 2);
  result.append(1, '"').append(text).append(1, '"');
  return result;
}

std::string join_quoted(const std::vector<std::string>& words) {
  std::string joined;
  for (const std::string& word : words) joined += (joined.empty() ? "" : ", ") + in_quotes(word);
  return joined;
}

std::string join_ints(const std::vector<int>& values) {
  std::string joined;
  for (int value : values) joined += (joined.empty() ? "" : ", ") + std::to_string(value);
  return joined;
}

std::string describe(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "the string " + in_quotes(**node.as_string());
    case toml::node_type::integer: return "the integer " + std::to_string(**node.as_integer());
    case toml::node_type::floating_point: return "the float " + float_literal(**node.as_floating_point());
    case toml::node_type::boolean: return std::string("the boolean ") + (**node.as_boolean() ? "true" : "false");
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}

}  // namespace trident
