#include "deck/locations.hpp"

#include "common/error.hpp"
#include "deck/tables.hpp"

namespace trident {

KeyLocations::KeyLocations(std::string source_name, const toml::table& root)
    : source_name_(std::move(source_name)), root_(root) {}

void KeyLocations::set_by_override(const std::string& key, const std::string& assignment) {
  overrides_[key] = "--set " + assignment;
}

bool KeyLocations::is_override(std::string_view key) const { return overrides_.contains(key); }

std::string KeyLocations::of(std::string_view key) const {
  if (const auto found = overrides_.find(key); found != overrides_.end()) return found->second;
  const auto in_file = [](const toml::node* node) { return node != nullptr && node->source().begin.line != 0; };
  if (const toml::node* node = node_at(root_, key); in_file(node)) return of_node(*node);
  // A table that `--set model.moe.experts=4` made: the first override inside it.
  const std::string inside = std::string(key) + ".";
  if (const auto found = overrides_.lower_bound(inside); found != overrides_.end() && found->first.starts_with(inside))
    return found->second;
  // A key left at its default: the line of the innermost table on its path that the file has.
  for (std::string_view path = split_key(key).first; !path.empty(); path = split_key(path).first) {
    if (const toml::node* table = node_at(root_, path); in_file(table)) return of_node(*table);
  }
  return source_name_;
}

std::string KeyLocations::of_node(const toml::node& node) const {
  const auto line = node.source().begin.line;
  if (line == 0) return source_name_;  // made by an override, not read from the file
  return source_name_ + ":" + std::to_string(line);
}

void KeyLocations::fail(std::string_view key, const std::string& message) const { fail_at(of(key), message); }

void fail_at(const std::string& location, const std::string& message) {
  throw InputError(location + ": " + message);
}

}  // namespace trident
