#include "plan/text_table.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace trident {

TextTable::TextTable(std::vector<std::string> headers, std::size_t label_columns)
    : headers_(std::move(headers)), label_columns_(label_columns) {}

void TextTable::add_row(std::vector<std::string> cells) {
  if (cells.size() > headers_.size()) throw std::invalid_argument("table row wider than its header");
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

void TextTable::print(std::ostream& out) const {
  std::vector<std::size_t> widths(headers_.size());
  for (std::size_t col = 0; col < headers_.size(); ++col) {
    widths[col] = headers_[col].size();
    for (const auto& row : rows_) widths[col] = std::max(widths[col], row[col].size());
  }
  const auto print_line = [&](const std::vector<std::string>& cells) {
    std::string line = "  ";
    for (std::size_t col = 0; col < cells.size(); ++col) {
      const std::string padding(widths[col] - cells[col].size(), ' ');
      if (col > 0) line += "  ";
      line += col < label_columns_ ? cells[col] + padding : padding + cells[col];
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << '\n';
  };
  print_line(headers_);
  for (const auto& row : rows_) print_line(row);
}

}  // namespace trident
