// `--set section.key=value` arguments.
#pragma once

#include <string>

#include <toml++/toml.h>

namespace trident {

struct Override {
  std::string assignment;  // as the user wrote it, for messages: "train.lr=3e-4"
  std::string section;     // "train", or "model.moe" for model.moe.experts
  std::string name;        // "lr"
  toml::table holder;      // holds the parsed value under the key "value"

  const toml::node& value() const { return *holder.get("value"); }
};

// Splits "section.key=value" (the section is everything before the key's last dot, so that
// "model.moe.experts=8" sets experts in [model.moe]) and parses the value as TOML (3e-4, 8, true,
// [2, 2], "x"); text that is not a TOML value is taken as a bare string, so `--set
// schedule.kind=gpipe` works.
// Throws InputError when the argument is not of the form section.key=value.
Override parse_override(const std::string& assignment);

}  // namespace trident
