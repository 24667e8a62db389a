#include "deck/locations.hpp"

#include "common/error.hpp"

namespace trident {

KeyLocations::KeyLocations(std::string source_name, const toml::table& root)
    : source_name_(std::move(source_name)), root_(root) {}

void KeyLocations::set_by_override(const std::string& key, const std::string& assignment) {
  overrides_[key] = "--set " + assignment;
}

bool KeyLocations::is_override(std::string_view key) const { return overrides_.contains(key); }

std::string KeyLocations::of(std::string_view key) const {
  if (const auto found = overrides_.find(key); found != overrides_.end()) return found->second;
  const std::size_t dot = key.find('.');
  const toml::node* section = root_.get(key.substr(0, dot));
  if (section == nullptr) return source_name_;
  if (const toml::table* table = section->as_table()) {
    if (const toml::node* value = table->get(key.substr(dot + 1))) return of_node(*value);
  }
  return of_node(*section);
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
