// The root attributes of a checkpoint that a resumed run relies on (DESIGN.md "Checkpoint"),
// checked when the file is read: missing, mistyped or out-of-range metadata makes the file a bad
// checkpoint (CheckpointError naming the file and the attribute, so "auto" falls back to the
// previous one), never a runtime failure or a negative step later.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "io/hdf5_attributes.hpp"

namespace trident {

struct CheckpointHeader {
  int step = 0;      // the optimizer steps taken; 0 <= step < 2^31
  std::string grid;  // "tp x pp x dp" of the run that wrote it, for the log
  // The data the run read (DESIGN.md "Token data"); absent in files written before they were
  // recorded: then no warning about changed data is possible.
  std::optional<std::int64_t> data_windows;  // >= 1
  bool data_shuffled = false;
};

// Throws CheckpointError ("checkpoint '<path>': attribute 'step' ...") when an attribute the
// header needs is missing, has another type or an impossible value.
CheckpointHeader checkpoint_header(const Attributes& attributes, const std::string& path);

}  // namespace trident
