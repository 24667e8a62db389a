// Growable datasets ("columns") for tables written while a run progresses: the timeline's /steps
// (one row per step) and /events (many rows per step, appended in batches). A column is a chunked
// dataset whose first dimension is unlimited: 1-D (one value per row) or 2-D [rows, width] (a
// fixed number of values per row, e.g. one per pipeline stage).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/hdf5_handle.hpp"

namespace trident {

class Hdf5Column {
 public:
  // Elements per chunk unless told otherwise: big enough that long runs don't fragment, small
  // enough that a tiny run's file stays small (a started chunk takes its full size on disk).
  static constexpr std::int64_t kDefaultChunkRows = 1024;

  // Selects the constructor that opens a column already in a file.
  struct OpenExisting {};

  // Creates the empty, chunked dataset `name` of element type `type` in `group`; `file` names the
  // file in error messages. width 0: 1-D, one value per row; width >= 1: 2-D [rows, width], whose
  // first dimension grows and whose second stays `width`.
  Hdf5Column(hid_t group, std::string name, hid_t type, std::string file,
             std::int64_t chunk_rows = kDefaultChunkRows, std::int64_t width = 0);

  // Opens the existing dataset `name` in `group` (for appending after a resume): 1-D, or 2-D with
  // its width taken from the file. Throws std::runtime_error naming file and dataset when it is
  // missing, of another rank, or its first dimension cannot grow.
  Hdf5Column(OpenExisting, hid_t group, std::string name, std::string file);

  // Grows the dataset by one row and writes `value` (max(width, 1) values of memory type `type`).
  void append(hid_t type, const void* value) { append_many(type, value, 1); }

  // Grows the dataset by `count` rows and writes the count × max(width, 1) contiguous values of
  // memory type `type` at `values` there: one extent change and one hyperslab write, whatever
  // `count`.
  void append_many(hid_t type, const void* values, std::int64_t count);

  // Reads every row into `values` (rows() × max(width, 1) values of memory type `type`; HDF5
  // converts between numeric types).
  void read_all(hid_t type, void* values) const;

  // Shrinks the dataset to its first `rows` rows (0 <= rows <= rows()).
  void truncate(std::int64_t rows);

  // Keeps the rows i with keep[i] (keep.size() == rows()), in their order, and drops the others:
  // a truncate when the kept rows come first, otherwise a read, compaction and rewrite of the
  // whole dataset in its stored type.
  void retain(const std::vector<bool>& keep);

  // True when the stored element type is of the class and size of memory type `type` (what the
  // writer would append); a resume checks its file against the layout it writes.
  bool stores(hid_t type) const;

  const std::string& name() const { return name_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t width() const { return width_; }

 private:
  // Writes `count` rows of memory type `type` from `values` at row `first_row` (inside the extent).
  void write_rows(std::int64_t first_row, std::int64_t count, hid_t type, const void* values);
  // "row 3 of dataset 'loss'" / "rows 3..7 of dataset 'loss'", for error messages.
  std::string rows_text(std::int64_t first, std::int64_t count) const;

  std::string name_;
  std::string file_;
  Hdf5Handle dataset_;
  std::int64_t rows_ = 0;
  std::int64_t width_ = 0;  // 0: 1-D
};

}  // namespace trident
