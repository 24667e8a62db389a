#include "io/hdf5_attributes.hpp"

#include "io/hdf5_handle.hpp"

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

}  // namespace

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
