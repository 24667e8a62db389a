#include "io/hdf5_handle.hpp"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace trident {

Hdf5Handle& Hdf5Handle::operator=(Hdf5Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = std::exchange(other.id_, H5I_INVALID_HID);
    close_ = other.close_;
  }
  return *this;
}

void Hdf5Handle::reset() {
  if (id_ >= 0 && close_ != nullptr) close_(id_);
  id_ = H5I_INVALID_HID;
}

namespace {

// Records the first entry of an upward walk: the innermost, most specific reason.
herr_t keep_innermost(unsigned depth, const H5E_error2_t* entry, void* innermost) {
  if (depth == 0 && entry->desc != nullptr) *static_cast<std::string*>(innermost) = entry->desc;
  return 0;
}

// The file drivers' reason for a failed system call is a dump of their state ("file write failed:
// time = ..., errno = 28, error message = '...', buf = ..."): keep its first clause and the OS's reason.
std::string without_driver_dump(const std::string& reason) {
  const std::size_t errno_at = reason.find("errno = ");
  if (errno_at == std::string::npos) return reason;
  const int os_error = std::atoi(reason.c_str() + errno_at + 8);
  return reason.substr(0, reason.find(':')) + ": " + std::strerror(os_error);
}

}  // namespace

void throw_hdf5_failure(const std::string& file, const std::string& operation) {
  std::string reason;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_innermost, &reason);
  H5Eclear2(H5E_DEFAULT);
  reason = without_driver_dump(reason);
  throw std::runtime_error("HDF5: " + operation + " failed for '" + file + "'" +
                           (reason.empty() ? "" : ": " + reason));
}

void silence_hdf5_error_printing() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

}  // namespace trident
