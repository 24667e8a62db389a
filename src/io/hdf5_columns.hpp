// Growable 1-D datasets ("columns"), one value appended at a time, for tables written while a
// run progresses (timeline /steps now, /events later).
#pragma once

#include <cstdint>
#include <string>

#include "io/hdf5_handle.hpp"

namespace trident {

class Hdf5Column {
 public:
  // Creates the empty, chunked, unlimited 1-D dataset `name` of element type `type` in `group`;
  // `file` names the file in error messages.
  Hdf5Column(hid_t group, std::string name, hid_t type, std::string file);

  // Grows the dataset by one element and writes `value` (of memory type `type`) there.
  void append(hid_t type, const void* value);

  std::int64_t rows() const { return rows_; }

 private:
  std::string name_;
  std::string file_;
  Hdf5Handle dataset_;
  std::int64_t rows_ = 0;
};

}  // namespace trident
