// Scalar attributes on HDF5 objects: integers, doubles and UTF-8 strings (variable length, so
// h5py returns them as str and long texts such as a whole deck fit), written and read back.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace trident {

using AttributeValue = std::variant<std::int64_t, double, std::string>;
using Attributes = std::vector<std::pair<std::string, AttributeValue>>;

// Creates attribute `name` on `object` (which lives in `file`, named in error messages).
void write_attribute(hid_t object, const std::string& name, const AttributeValue& value, const std::string& file);

// Every scalar attribute of `object` (in `file`, named in error messages) in name order: integers
// as int64, floating point as double, strings (variable or fixed length) as std::string. Attributes
// of other kinds (arrays, compounds) are skipped: readers look up the scalars they know.
Attributes read_attributes(hid_t object, const std::string& file);

// The value of attribute `name` as T; throws std::runtime_error naming it when it is missing or
// holds another type.
template <class T>
const T& attribute_value(const Attributes& attributes, const std::string& name) {
  for (const auto& [key, value] : attributes) {
    if (key != name) continue;
    if (const T* typed = std::get_if<T>(&value)) return *typed;
    throw std::runtime_error("attribute '" + name + "' has an unexpected type");
  }
  throw std::runtime_error("attribute '" + name + "' is missing");
}

}  // namespace trident
