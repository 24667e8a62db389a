// Every deck key: its section, its name, and how its TOML value is checked and stored in a Deck.
// The checks here concern one value each (type, range, choice); rules that relate several keys
// live in relations.cpp.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "deck/config.hpp"

namespace trident {

// What a key's reader needs besides the value: names for messages and the base of relative paths.
struct KeySite {
  std::string key;       // "model.layers"
  std::string location;  // "deck.toml:12" or "--set model.layers=0"
  std::filesystem::path base_dir;

  // Throws InputError "<location>: <key> <complaint>".
  [[noreturn]] void fail(const std::string& complaint) const;
};

struct KeySpec {
  std::string section;
  std::string name;
  std::function<void(const toml::node& value, Deck& deck, const KeySite& site)> read;

  std::string full_name() const { return section + "." + name; }
};

const std::vector<KeySpec>& deck_keys();
const KeySpec* find_key(std::string_view section, std::string_view name);

std::vector<std::string> section_names();
std::vector<std::string> key_names();                            // every "section.key"
std::vector<std::string> key_names_in(std::string_view section);  // "layers", "d_model", ...

}  // namespace trident
