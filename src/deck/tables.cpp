#include "deck/tables.hpp"

#include <stdexcept>

namespace trident {

namespace {

// Takes the first part off `path`: "model.moe" gives "model" and leaves "moe".
std::string_view take_first_part(std::string_view& path) {
  const std::size_t dot = path.find('.');
  const std::string_view part = path.substr(0, dot);
  path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  return part;
}

}  // namespace

std::pair<std::string_view, std::string_view> split_key(std::string_view key) {
  const std::size_t dot = key.rfind('.');
  if (dot == std::string_view::npos) return {std::string_view(), key};
  return {key.substr(0, dot), key.substr(dot + 1)};
}

std::string dotted(std::string_view section, std::string_view name) {
  return section.empty() ? std::string(name) : std::string(section) + "." + std::string(name);
}

const toml::node* node_at(const toml::table& root, std::string_view path) {
  const toml::table* table = &root;
  const toml::node* node = nullptr;
  while (table != nullptr && !path.empty()) {
    node = table->get(take_first_part(path));
    if (node == nullptr) return nullptr;
    table = node->as_table();
  }
  return path.empty() ? node : nullptr;
}

const toml::table* table_at(const toml::table& root, std::string_view path) {
  if (path.empty()) return &root;
  const toml::node* node = node_at(root, path);
  return node == nullptr ? nullptr : node->as_table();
}

toml::table& make_table_at(toml::table& root, std::string_view path) {
  toml::table* table = &root;
  while (!path.empty()) {
    const std::string_view part = take_first_part(path);
    toml::node* node = table->get(part);
    if (node == nullptr) node = &table->insert(part, toml::table{}).first->second;
    table = node->as_table();
    if (table == nullptr) throw std::logic_error("make_table_at: `" + std::string(part) + "` is not a table");
  }
  return *table;
}

}  // namespace trident
