// Text views of a schedule: the timed diagram that `trident plan` prints (render_schedule) and the
// plain per-rank listing the golden files hold (list_actions).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "schedule/schedule.hpp"

namespace trident {
namespace {

// A diagram wider than this many cells is unreadable anyway; with very uneven costs (a tiny W
// next to a long F) the time unit is coarsened so that the drawing stays bounded.
constexpr double kMaxCells = 4000.0;
constexpr int kCellsPerTick = 5;  // a time label on the ruler every this many cells

int decimal_digits(int value) { return static_cast<int>(std::to_string(std::max(value, 0)).size()); }

std::string format(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

std::string pad_left(const std::string& text, int width) {
  return std::string(std::max(0, width - static_cast<int>(text.size())), ' ') + text;
}

// One cell's text: the letter (lower case for odd chunks, so that the two chunks of an
// interleaved schedule tell apart) and the micro-batch, zero-padded to the cell's width.
std::string cell_label(const Action& action, int digits) {
  char letter = action_letter(action.kind);
  if (action.chunk % 2 == 1) letter = static_cast<char>(std::tolower(static_cast<unsigned char>(letter)));
  std::string number = std::to_string(action.microbatch);
  return std::string(1, letter) + std::string(std::max(0, digits - static_cast<int>(number.size())), '0') + number;
}

// Greedy word wrap; a word longer than the width is cut.
std::string wrap(const std::string& text, int width) {
  std::istringstream words(text);
  std::string word, line, out;
  while (words >> word) {
    while (static_cast<int>(word.size()) > width) {
      if (!line.empty()) out += line + "\n", line.clear();
      out += word.substr(0, width) + "\n";
      word = word.substr(width);
    }
    if (word.empty()) continue;
    if (!line.empty() && static_cast<int>(line.size() + 1 + word.size()) > width) out += line + "\n", line.clear();
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += line + "\n";
  return out;
}

// Explains the letters that occur, the case of chunks and the time unit.
std::string legend(const SimulatedStep& timing, int chunks, double unit) {
  bool present[4] = {false, false, false, false};
  for (const std::vector<TimedAction>& list : timing.per_rank) {
    for (const TimedAction& timed : list) present[static_cast<int>(timed.action.kind)] = true;
  }
  const char* names[4] = {"forward", "backward", "input grad", "weight grad"};
  std::string text = "legend:";
  for (int kind = 0; kind < 4; ++kind) {
    if (!present[kind]) continue;
    text += std::string(" ") + action_letter(static_cast<ActionKind>(kind)) + " " + names[kind] + ",";
  }
  text += " . idle;";
  if (chunks > 1) {
    text += chunks == 2 ? " UPPER case chunk 0, lower case chunk 1;"
                        : " UPPER case even chunks (0, 2, ...), lower case odd chunks (1, 3, ...);";
  }
  text += " one cell = " + format(unit) + " time unit" + (unit == 1.0 ? "" : "s");
  return text;
}

// "1f1b p=4 m=8: step time 33, bubble 27.27%": what the drawing adds up to.
std::string summary(const Schedule& schedule, const SimulatedStep& timing) {
  return word_of(schedule.kind) + " p=" + std::to_string(schedule.stages) +
         " m=" + std::to_string(schedule.microbatches) +
         (schedule.chunks > 1 ? " v=" + std::to_string(schedule.chunks) : "") + ": step time " +
         format(timing.step_time) + ", bubble " + format(100.0 * timing.bubble) + "%";
}

}  // namespace

std::string render_schedule(const Schedule& schedule, const SimulatedStep& timing, int width) {
  const int p = schedule.stages;
  if (static_cast<int>(timing.per_rank.size()) != p) {
    throw InputError("cannot draw the schedule: the timing has " + std::to_string(timing.per_rank.size()) +
                     " ranks, the schedule " + std::to_string(p));
  }

  // The time unit is the shortest action, so every action gets at least one cell and, with the
  // usual integer cost ratios (F = 1, B = 2), every action a whole number of cells.
  double unit = std::numeric_limits<double>::infinity();
  for (const std::vector<TimedAction>& list : timing.per_rank) {
    for (const TimedAction& timed : list) {
      if (timed.end > timed.start) unit = std::min(unit, timed.end - timed.start);
    }
  }
  if (!std::isfinite(unit)) unit = 1.0;
  if (timing.step_time / unit > kMaxCells) unit = timing.step_time / kMaxCells;
  const auto cell_at = [&](double time) { return static_cast<long>(std::llround(time / unit)); };
  const long cells = std::max(1L, cell_at(timing.step_time));

  const int digits = decimal_digits(schedule.microbatches - 1);
  const int cell_width = 1 + digits;
  std::vector<std::string> rows(p, std::string(cells * cell_width, '.'));
  for (int rank = 0; rank < p; ++rank) {
    for (const TimedAction& timed : timing.per_rank[rank]) {
      const long first = std::min(cell_at(timed.start), cells - 1);
      const long end = std::min(std::max(first + 1, cell_at(timed.end)), cells);
      const std::string label = cell_label(timed.action, digits);
      for (long cell = first; cell < end; ++cell) rows[rank].replace(cell * cell_width, cell_width, label);
    }
  }

  const int rank_digits = decimal_digits(p - 1);
  const int prefix_width = 5 + rank_digits + 2;  // "rank " + number + " |"
  const long per_block = (width - prefix_width) / cell_width;
  if (per_block < 1) {
    throw InputError("cannot draw the schedule in " + std::to_string(width) + " columns: it needs at least " +
                     std::to_string(prefix_width + cell_width));
  }

  std::string out;
  for (long block = 0; block < cells; block += per_block) {
    const long count = std::min(per_block, cells - block);
    if (block > 0) out += "\n";
    // A ruler of time labels every few cells, each written where there is room for it.
    std::string ruler(count * cell_width, ' ');
    long free_from = 0;
    for (long cell = block; cell < block + count; ++cell) {
      if (cell % kCellsPerTick != 0) continue;
      const std::string label = format(static_cast<double>(cell) * unit);
      const long at = (cell - block) * cell_width;
      if (at < free_from || at + static_cast<long>(label.size()) > static_cast<long>(ruler.size())) continue;
      ruler.replace(at, label.size(), label);
      free_from = at + static_cast<long>(label.size()) + 1;
    }
    ruler.erase(ruler.find_last_not_of(' ') + 1);
    std::string time_prefix = "time";
    time_prefix.resize(prefix_width - 2, ' ');
    out += time_prefix + " |" + ruler + "\n";
    for (int rank = 0; rank < p; ++rank) {
      out += "rank " + pad_left(std::to_string(rank), rank_digits) + " |" +
             rows[rank].substr(block * cell_width, count * cell_width) + "\n";
    }
  }
  out += wrap(legend(timing, schedule.chunks, unit), width);
  out += wrap(summary(schedule, timing), width);
  return out;
}

std::string list_actions(const Schedule& schedule) {
  std::string out;
  for (int rank = 0; rank < static_cast<int>(schedule.actions.size()); ++rank) {
    out += "rank " + std::to_string(rank) + ":";
    for (const Action& action : schedule.actions[rank]) {
      out += ' ';
      out += to_string(action, schedule.chunks);
    }
    out += "\n";
  }
  return out;
}

}  // namespace trident
