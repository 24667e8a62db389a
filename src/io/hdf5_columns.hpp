// Growable 1-D datasets ("columns") for tables written while a run progresses: the timeline's
// /steps (one row per step) and /events (many rows per step, appended in batches).
#pragma once

#include <cstdint>
#include <string>

#include "io/hdf5_handle.hpp"

namespace trident {

class Hdf5Column {
 public:
  // Elements per chunk unless told otherwise: big enough that long runs don't fragment, small
  // enough that a tiny run's file stays small (a started chunk takes its full size on disk).
  static constexpr std::int64_t kDefaultChunkRows = 1024;

  // Creates the empty, chunked, unlimited 1-D dataset `name` of element type `type` in `group`;
  // `file` names the file in error messages.
  Hdf5Column(hid_t group, std::string name, hid_t type, std::string file,
             std::int64_t chunk_rows = kDefaultChunkRows);

  // Grows the dataset by one element and writes `value` (of memory type `type`) there.
  void append(hid_t type, const void* value) { append_many(type, value, 1); }

  // Grows the dataset by `count` elements and writes the `count` contiguous values of memory
  // type `type` at `values` there: one extent change and one hyperslab write, whatever `count`.
  void append_many(hid_t type, const void* values, std::int64_t count);

  std::int64_t rows() const { return rows_; }

 private:
  std::string name_;
  std::string file_;
  Hdf5Handle dataset_;
  std::int64_t rows_ = 0;
};

}  // namespace trident
