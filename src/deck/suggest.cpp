#include "deck/suggest.hpp"

#include <algorithm>
#include <limits>

namespace trident {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: Levenshtein plus adjacent transpositions ("d_modle" is one slip).
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

namespace {

// Longer words tolerate more slips; two are always allowed.
std::size_t tolerance(std::string_view word) { return std::max<std::size_t>(2, word.size() / 3); }

}  // namespace

std::optional<std::string> closest_word(std::string_view word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = tolerance(word) + 1;
  for (const std::string& candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

std::optional<std::string> closest_key(std::string_view section, std::string_view name,
                                       const std::vector<std::string>& valid_keys) {
  const std::string full = std::string(section) + "." + std::string(name);
  std::optional<std::string> best;
  std::size_t best_score = std::numeric_limits<std::size_t>::max();
  for (const std::string& candidate : valid_keys) {
    const std::size_t dot = candidate.rfind('.');  // "model.moe.experts": section "model.moe"
    const std::string_view candidate_section = std::string_view(candidate).substr(0, dot);
    const std::string_view candidate_name = std::string_view(candidate).substr(dot + 1);
    const std::size_t by_name =
        edit_distance(name, candidate_name) + (candidate_section == section ? 0 : 1);
    const std::size_t score = std::min(edit_distance(full, candidate), by_name);
    if (score < best_score) {
      best = candidate;
      best_score = score;
    }
  }
  if (best_score > tolerance(name)) return std::nullopt;
  return best;
}

}  // namespace trident
