// Column-aligned plain-text tables for the plan: the leading label columns left-aligned, the number
// columns after them right-aligned. ASCII only, so byte widths are display widths.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace trident {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> headers, std::size_t label_columns = 1);

  // Rows shorter than the header are padded with empty cells.
  void add_row(std::vector<std::string> cells);

  // Indented by two spaces, as every table of `trident plan`.
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::size_t label_columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace trident
