// How values are written in error messages.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

namespace trident {

std::string format_number(double value);  // 0.0003, 1, 1e+20, inf
std::string in_quotes(std::string_view text);
std::string join_quoted(const std::vector<std::string>& words);  // "a", "b", "c"
std::string join_ints(const std::vector<int>& values);           // 1, 2, 4
std::string describe(const toml::node& node);                    // the string "two", an array, ...

}  // namespace trident
