#include "schedule/csv_schedule.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <vector>

#include "common/error.hpp"
#include "schedule/placement.hpp"

namespace trident {
namespace {

// One cell as written: the virtual stage, the action kind and the micro-batch.
struct Cell {
  int row = 0;  // 1-based, as a reader counts lines
  std::string text;
  int stage = 0;
  ActionKind kind = ActionKind::forward;
  int microbatch = 0;
};

std::string where(int row, const std::string& text) {
  std::string place = "row ";
  return place.append(std::to_string(row)).append(", action \"").append(text).append("\"");
}

std::optional<ActionKind> kind_of_letter(char letter) {
  for (const ActionKind kind :
       {ActionKind::forward, ActionKind::backward, ActionKind::input_grad, ActionKind::weight_grad})
    if (action_letter(kind) == letter) return kind;
  return std::nullopt;
}

// Digits, one letter of F, B, I, W, digits: "12F3".
Cell parse_cell(int row, const std::string& text) {
  const auto letter = std::ranges::find_if(text, [](char c) { return !std::isdigit(static_cast<unsigned char>(c)); });
  const std::size_t at = static_cast<std::size_t>(letter - text.begin());
  const bool digits_after = at + 1 < text.size() && std::ranges::all_of(text.substr(at + 1), [](char c) {
                              return std::isdigit(static_cast<unsigned char>(c));
                            });
  const std::optional<ActionKind> kind = at < text.size() ? kind_of_letter(text[at]) : std::nullopt;
  if (at == 0 || !kind || !digits_after || at > 6 || text.size() - at - 1 > 7)
    throw InputError(where(row, text) + ": an action is {stage}{F|B|I|W}{micro-batch}, such as 0F0 or 3W12");
  return {row, text, std::stoi(text.substr(0, at)), *kind, std::stoi(text.substr(at + 1))};
}

std::vector<std::vector<Cell>> parse_rows(std::string_view text) {
  std::vector<std::vector<Cell>> rows;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    start = end + 1;
    std::vector<Cell>& cells = rows.emplace_back();
    std::size_t from = 0;
    while (from <= line.size()) {
      const std::size_t comma = std::min(line.find(',', from), line.size());
      std::string cell(line.substr(from, comma - from));
      std::erase_if(cell, [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
      if (!cell.empty()) cells.push_back(parse_cell(static_cast<int>(rows.size()), cell));
      from = comma + 1;
    }
  }
  while (!rows.empty() && rows.back().empty()) rows.pop_back();  // trailing blank lines
  if (rows.empty()) throw InputError("the file has no rows: one row of actions per pipeline rank");
  return rows;
}

// Which placement puts every stage a row names on that row's rank.
ChunkPlacement infer_placement(const std::vector<std::vector<Cell>>& rows, int chunks) {
  const int p = static_cast<int>(rows.size());
  for (const ChunkPlacement placement : {ChunkPlacement::interleaved, ChunkPlacement::v_shape}) {
    if (placement == ChunkPlacement::v_shape && chunks != 2) continue;
    const bool fits = std::ranges::all_of(rows, [&](const std::vector<Cell>& cells) {
      return std::ranges::all_of(
          cells, [&](const Cell& c) { return chunk_position(placement, p, c.stage).rank == c.row - 1; });
    });
    if (fits) return placement;
  }
  for (const std::vector<Cell>& cells : rows)
    for (const Cell& c : cells)
      if (chunk_position(ChunkPlacement::interleaved, p, c.stage).rank != c.row - 1)
        throw InputError(where(c.row, c.text) + ": stage " + std::to_string(c.stage) + " is not on rank " +
                         std::to_string(c.row - 1) + " in trident's placements of " + std::to_string(p * chunks) +
                         " stages on " + std::to_string(p) + " ranks (stage s on rank s mod " + std::to_string(p) +
                         (chunks == 2 ? ", or a V: s or " + std::to_string(2 * p - 1) + " - s" : std::string()) + ")");
  throw InputError("the stages fit no single placement: each row's stages must follow one rule for every row");
}

}  // namespace

std::string schedule_csv(const Schedule& schedule) {
  std::string text;
  for (int rank = 0; rank < schedule.stages; ++rank) {
    const std::vector<Action>& actions = schedule.actions[rank];
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      if (i > 0) text += ',';
      text.append(std::to_string(schedule.virtual_stage[rank][a.chunk])).append(1, action_letter(a.kind));
      text.append(std::to_string(a.microbatch));
    }
    text += '\n';
  }
  return text;
}

Schedule read_schedule_csv(std::string_view text) {
  const std::vector<std::vector<Cell>> rows = parse_rows(text);
  const int p = static_cast<int>(rows.size());
  int stages = 0, microbatches = 0;
  for (const std::vector<Cell>& cells : rows)
    for (const Cell& c : cells)
      stages = std::max(stages, c.stage + 1), microbatches = std::max(microbatches, c.microbatch + 1);
  if (stages == 0) throw InputError("the file names no action: one row of actions per pipeline rank");
  if (stages % p != 0)
    throw InputError("the actions name " + std::to_string(stages) + " stages (0 … " + std::to_string(stages - 1) +
                     "), not a multiple of the " + std::to_string(p) + " rows (pipeline ranks)");
  const int chunks = stages / p;
  const ChunkPlacement placement = infer_placement(rows, chunks);
  Schedule schedule = empty_schedule(ScheduleKind::file, p, microbatches, chunks, placement);
  for (const std::vector<Cell>& cells : rows)
    for (const Cell& c : cells)
      schedule.actions[c.row - 1].push_back({c.kind, c.microbatch, chunk_position(placement, p, c.stage).chunk});
  if (std::string problem = find_schedule_problem(schedule); !problem.empty())
    throw InputError("the schedule cannot run (rank r is row r + 1): " + problem);
  return schedule;
}

}  // namespace trident
