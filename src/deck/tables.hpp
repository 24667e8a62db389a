// Deck sections by dotted name: section "model.moe" is the table `moe` inside the table `model`,
// which TOML writes [model.moe]; a key's section is everything before its last dot.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include <toml++/toml.h>

namespace trident {

// "model.moe.experts" -> {"model.moe", "experts"}; a name without a dot has the section "".
std::pair<std::string_view, std::string_view> split_key(std::string_view key);

// "model" and "moe" -> "model.moe"; the section "" gives the name alone.
std::string dotted(std::string_view section, std::string_view name);

// The node at `path` ("model.moe.experts") under `root`; null when a part is missing or a part
// before the last is not a table.
const toml::node* node_at(const toml::table& root, std::string_view path);

// The table at `path` ("model.moe"; "" is `root`), or null.
const toml::table* table_at(const toml::table& root, std::string_view path);

// The table at `path`, inserting empty tables where parts are missing (for `--set`). Throws
// std::logic_error when a part is there but not a table, which check_known_keys rules out first.
toml::table& make_table_at(toml::table& root, std::string_view path);

}  // namespace trident
