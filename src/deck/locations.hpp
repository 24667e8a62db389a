// Where each key of a deck was set, so that every message can point at it: `deck.toml:12` for a
// key in the file, `--set train.lr=0` for an override, and for a key left at its default the line
// of its section (the innermost one the file has: [model.moe], else [model]) or, failing that, the
// file. A section's own name ("model.moe") gives its header's line.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include <toml++/toml.h>

namespace trident {

class KeyLocations {
 public:
  // `root` is the deck's table (with overrides applied); it must outlive this object.
  KeyLocations(std::string source_name, const toml::table& root);

  // Records that `key` ("section.key", "model.moe.experts") was last set by the `--set` argument `assignment`.
  void set_by_override(const std::string& key, const std::string& assignment);
  bool is_override(std::string_view key) const;

  std::string of(std::string_view key) const;
  std::string of_node(const toml::node& node) const;
  const std::string& file() const { return source_name_; }

  // Throws InputError "<where key was set>: <message>".
  [[noreturn]] void fail(std::string_view key, const std::string& message) const;

 private:
  std::string source_name_;
  const toml::table& root_;
  std::map<std::string, std::string, std::less<>> overrides_;
};

// Throws InputError "<location>: <message>".
[[noreturn]] void fail_at(const std::string& location, const std::string& message);

}  // namespace trident
