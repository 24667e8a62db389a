// A fixed choice's words: each enum that a deck, a machine file or a report spells has one table of
// (value, word) pairs, found by `choices(T{})` next to the enum (deck/choices.hpp,
// schedule/registry.hpp), which parses and prints it, so that a word is spelled in one place only.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace trident {

template <class T>
struct Choice {
  T value;
  std::string_view word;
};

// The deck's word for `value`.
template <class T>
std::string word_of(const T& value) {
  for (const Choice<T>& choice : choices(T{}))
    if (choice.value == value) return std::string(choice.word);
  return "?";
}

// The value the deck's `word` names, if any.
template <class T>
std::optional<T> parse_choice(std::string_view word) {
  for (const Choice<T>& choice : choices(T{}))
    if (choice.word == word) return choice.value;
  return std::nullopt;
}

}  // namespace trident
