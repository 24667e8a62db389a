// Owning HDF5 identifiers and checked HDF5 calls: every failure becomes a std::runtime_error
// that names the file, the operation and HDF5's own innermost reason.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>

namespace trident {

// One open HDF5 object (file, group, dataset, dataspace, type, property list, attribute),
// closed with its matching H5?close when the handle goes away.
class Hdf5Handle {
 public:
  using Close = herr_t (*)(hid_t);

  Hdf5Handle() = default;
  Hdf5Handle(hid_t id, Close close) : id_(id), close_(close) {}
  Hdf5Handle(Hdf5Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = H5I_INVALID_HID; }
  Hdf5Handle& operator=(Hdf5Handle&& other) noexcept;
  Hdf5Handle(const Hdf5Handle&) = delete;
  Hdf5Handle& operator=(const Hdf5Handle&) = delete;
  ~Hdf5Handle() { reset(); }

  hid_t get() const { return id_; }

 private:
  void reset();

  hid_t id_ = H5I_INVALID_HID;
  Close close_ = nullptr;
};

[[noreturn]] void throw_hdf5_failure(const std::string& file, const std::string& operation);

// HDF5 calls return a negative hid_t / herr_t on failure; returns `result` otherwise.
template <class Result>
Result checked(Result result, const std::string& file, const std::string& operation) {
  if (result < 0) throw_hdf5_failure(file, operation);
  return result;
}

// Turns off HDF5's printing of its error stack to stderr: our exceptions carry the message.
void silence_hdf5_error_printing();

// The HDF5 memory type of a C++ value type.
template <class T>
hid_t native_type();
template <>
inline hid_t native_type<std::int64_t>() { return H5T_NATIVE_INT64; }
template <>
inline hid_t native_type<double>() { return H5T_NATIVE_DOUBLE; }

}  // namespace trident
