// Scalar attributes on HDF5 objects: integers, doubles and UTF-8 strings (variable length, so
// h5py returns them as str and long texts such as a whole deck fit).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace trident {

using AttributeValue = std::variant<std::int64_t, double, std::string>;
using Attributes = std::vector<std::pair<std::string, AttributeValue>>;

// Creates attribute `name` on `object` (which lives in `file`, named in error messages).
void write_attribute(hid_t object, const std::string& name, const AttributeValue& value, const std::string& file);

}  // namespace trident
