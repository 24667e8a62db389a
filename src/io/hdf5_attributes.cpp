#include "io/hdf5_attributes.hpp"

#include "io/hdf5_handle.hpp"

#include <optional>

namespace trident {

namespace {

void write_scalar(hid_t object, const std::string& name, hid_t type, const void* value, const std::string& file) {
  const std::string what = "attribute '" + name + "'";
  const Hdf5Handle space(checked(H5Screate(H5S_SCALAR), file, "create dataspace for " + what), H5Sclose);
  const Hdf5Handle attribute(
      checked(H5Acreate2(object, name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT), file, "create " + what),
      H5Aclose);
  checked(H5Awrite(attribute.get(), type, value), file, "write " + what);
}

herr_t collect_name(hid_t, const char* name, const H5A_info_t*, void* names) {
  static_cast<std::vector<std::string>*>(names)->push_back(name);
  return 0;
}

std::string read_string(hid_t attribute, hid_t file_type, const std::string& file, const std::string& what) {
  const Hdf5Handle memory_type(checked(H5Tcopy(file_type), file, "copy type of " + what), H5Tclose);
  if (checked(H5Tis_variable_str(file_type), file, "inspect type of " + what) > 0) {
    char* characters = nullptr;
    checked(H5Aread(attribute, memory_type.get(), &characters), file, "read " + what);
    std::string text = characters != nullptr ? characters : "";
    H5free_memory(characters);
    return text;
  }
  // Fixed length: null-terminated or null/space-padded to the type's size.
  std::string text(H5Tget_size(file_type), '\0');
  checked(H5Aread(attribute, memory_type.get(), text.data()), file, "read " + what);
  text.resize(text.find('\0') == std::string::npos ? text.size() : text.find('\0'));
  if (H5Tget_strpad(file_type) == H5T_STR_SPACEPAD)
    while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// The value of one attribute, or nullopt for kinds that AttributeValue does not hold.
std::optional<AttributeValue> read_one(hid_t object, const std::string& name, const std::string& file) {
  const std::string what = "attribute '" + name + "'";
  const Hdf5Handle attribute(checked(H5Aopen(object, name.c_str(), H5P_DEFAULT), file, "open " + what), H5Aclose);
  const Hdf5Handle space(checked(H5Aget_space(attribute.get()), file, "dataspace of " + what), H5Sclose);
  if (H5Sget_simple_extent_type(space.get()) != H5S_SCALAR) return std::nullopt;
  const Hdf5Handle type(checked(H5Aget_type(attribute.get()), file, "type of " + what), H5Tclose);
  switch (H5Tget_class(type.get())) {
    case H5T_INTEGER: {
      std::int64_t value = 0;
      checked(H5Aread(attribute.get(), native_type<std::int64_t>(), &value), file, "read " + what);
      return value;
    }
    case H5T_FLOAT: {
      double value = 0;
      checked(H5Aread(attribute.get(), native_type<double>(), &value), file, "read " + what);
      return value;
    }
    case H5T_STRING:
      return read_string(attribute.get(), type.get(), file, what);
    default:
      return std::nullopt;
  }
}

}  // namespace

Attributes read_attributes(hid_t object, const std::string& file) {
  std::vector<std::string> names;
  hsize_t position = 0;
  checked(H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_INC, &position, collect_name, &names), file,
          "list attributes");
  Attributes attributes;
  for (const std::string& name : names)
    if (std::optional<AttributeValue> value = read_one(object, name, file)) attributes.emplace_back(name, *value);
  return attributes;
}

void write_attribute(hid_t object, const std::string& name, const AttributeValue& value, const std::string& file) {
  if (const auto* text = std::get_if<std::string>(&value)) {
    const Hdf5Handle type(checked(H5Tcopy(H5T_C_S1), file, "copy string type"), H5Tclose);
    checked(H5Tset_size(type.get(), H5T_VARIABLE), file, "make string type variable-length");
    checked(H5Tset_cset(type.get(), H5T_CSET_UTF8), file, "set string type to UTF-8");
    const char* characters = text->c_str();
    write_scalar(object, name, type.get(), &characters, file);
  } else if (const auto* integer = std::get_if<std::int64_t>(&value)) {
    write_scalar(object, name, native_type<std::int64_t>(), integer, file);
  } else {
    write_scalar(object, name, native_type<double>(), &std::get<double>(value), file);
  }
}

}  // namespace trident
