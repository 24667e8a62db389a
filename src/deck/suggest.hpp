// "Did you mean ...?" for misspelt keys, sections and choices.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trident {

// Edit distance counting insertions, deletions, substitutions and swaps of neighbours as one each.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word`, if it is near enough to be a plausible typo.
std::optional<std::string> closest_word(std::string_view word, const std::vector<std::string>& candidates);

// The valid key ("section.key", the section dotted for [model.moe]) nearest to `section`.`name`.
// A key name that exists in another section counts as nearly right, so `model.lr` suggests
// `train.lr` and `model.experts` suggests `model.moe.experts`.
std::optional<std::string> closest_key(std::string_view section, std::string_view name,
                                       const std::vector<std::string>& valid_keys);

}  // namespace trident
