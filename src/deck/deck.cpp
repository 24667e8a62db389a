// The deck pipeline: TOML text -> known keys only -> overrides applied -> typed values -> relations.
#include "deck/deck.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "deck/locations.hpp"
#include "deck/messages.hpp"
#include "deck/model_family.hpp"
#include "deck/overrides.hpp"
#include "deck/schedule_file.hpp"
#include "deck/relations.hpp"
#include "deck/schema.hpp"
#include "deck/suggest.hpp"
#include "deck/tables.hpp"
#include "deck/token_paths.hpp"

namespace trident {

namespace fs = std::filesystem;

namespace {

toml::table parse_toml(const std::string& text, const std::string& source_name) {
  try {
    return toml::parse(text, std::string_view(source_name));
  } catch (const toml::parse_error& error) {
    fail_at(source_name + ":" + std::to_string(error.source().begin.line),
            "invalid TOML: " + std::string(error.description()));
  }
}

std::string unknown_key_message(std::string_view section, std::string_view name) {
  const std::string key = dotted(section, name);
  std::string message = "unknown key `" + key + "`";
  if (const auto near = closest_key(section, name, key_names())) return message + "; did you mean `" + *near + "`?";
  if (section.empty()) return message + "; every key belongs in a section: " + join_quoted(section_names());
  const std::vector<std::string> keys = key_names_in(section);
  if (keys.empty()) return message + "; there is no section [" + std::string(section) + "]: the sections are " +
                           join_quoted(section_names());
  return message + "; the keys of [" + std::string(section) + "] are " + join_quoted(keys);
}

// A table the schema has no section for: [trian] at the top, [model.mo] inside [model].
std::string unknown_section_message(const std::string& name) {
  const std::vector<std::string> sections = section_names();
  const auto near = closest_word(name, sections);
  return "unknown section [" + name + "]" +
         (near ? "; did you mean [" + *near + "]?" : "; the sections are " + join_quoted(sections));
}

// Rejects tables and keys that are not in the schema, before any value is read. `section` is the
// dotted name of `table` ("" for the deck's root): a table under it whose dotted name is a
// section ([model.moe] in [model]) is checked key by key in turn.
void check_known_keys(const toml::table& table, const std::string& section, const KeyLocations& where) {
  const std::vector<std::string> sections = section_names();
  for (auto&& [key, value] : table) {
    const std::string name = dotted(section, key.str());
    if (find_key(section, key.str()) != nullptr) continue;
    // A quoted key with a dot ("model.moe" = ...) names no section: read_values would not find it.
    const bool is_section = key.str().find('.') == std::string_view::npos &&
                            std::ranges::find(sections, name) != sections.end();
    if (is_section && value.is_table()) {
      check_known_keys(*value.as_table(), name, where);
    } else if (is_section) {
      fail_at(where.of_node(value),
              "`" + name + "` must be a section ([" + name + "] followed by its keys), got " + describe(value));
    } else {
      fail_at(where.of_node(value), value.is_table() ? unknown_section_message(name)
                                                     : unknown_key_message(section, key.str()));
    }
  }
}

void apply_override(toml::table& root, const Override& change, KeyLocations& where) {
  if (find_key(change.section, change.name) == nullptr) {
    fail_at("--set " + change.assignment, unknown_key_message(change.section, change.name));
  }
  make_table_at(root, change.section).insert_or_assign(change.name, change.value());
  where.set_by_override(dotted(change.section, change.name), change.assignment);
}

Deck read_values(const toml::table& root, const KeyLocations& where, const fs::path& deck_dir) {
  Deck deck;
  for (const KeySpec& key : deck_keys()) {
    const toml::table* section = table_at(root, key.section);
    const toml::node* value = section == nullptr ? nullptr : section->get(key.name);
    if (value == nullptr) continue;  // keeps the default from config.hpp
    const std::string name = key.full_name();
    const KeySite site{name, where.of(name), where.is_override(name) ? fs::current_path() : deck_dir};
    key.read(*value, deck, site);
  }
  return deck;
}

// The deck as run: the file's text and then the overrides, so that a run's copy says it all.
std::string recorded_text(const std::string& text, const std::vector<std::string>& overrides) {
  std::string recorded = text;
  if (!recorded.empty() && recorded.back() != '\n') recorded += '\n';
  for (const std::string& assignment : overrides) recorded += "# --set " + assignment + "\n";
  return recorded;
}

}  // namespace

Deck parse_deck(const std::string& text, const std::string& source_name, const std::vector<std::string>& overrides) {
  toml::table root = parse_toml(text, source_name);
  KeyLocations where(source_name, root);
  check_known_keys(root, "", where);
  if (!root.contains("model")) {
    fail_at(source_name, "missing section [model]; a deck must describe its model: [model] with layers, d_model, "
                         "heads, seq_len, vocab");
  }
  for (const std::string& assignment : overrides) apply_override(root, parse_override(assignment), where);

  const fs::path deck_dir = source_name.empty() ? fs::current_path() : fs::absolute(source_name).parent_path();
  Deck deck = read_values(root, where, deck_dir);
  resolve_model_family(deck, *root["model"].as_table(), where);
  deck.eval.enabled = root.contains("eval");
  resolve_token_paths(deck, where);
  read_schedule_file(deck, where);
  check_relations(deck, where);
  deck.path = source_name;
  deck.text = recorded_text(text, overrides);
  return deck;
}

Deck load_deck(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code error;
  if (!fs::exists(path, error)) {
    fail_at(path, "deck file not found (working directory " + fs::current_path().string() +
                      "); give the path of a TOML deck, e.g. input_decks/tiny.toml");
  }
  if (fs::is_directory(path, error)) fail_at(path, "is a directory, not a deck file; give the path of a TOML deck");
  std::ifstream file(path, std::ios::binary);
  if (!file) fail_at(path, "cannot open the deck file; check its permissions");
  std::ostringstream text;
  text << file.rdbuf();
  return parse_deck(text.str(), path, overrides);
}

}  // namespace trident
