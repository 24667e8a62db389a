// libFuzzer target: the checkpoint reader's metadata (issue 22, item 6). The input decodes into a
// file's root attributes (the names a checkpoint uses or others; integers, doubles or strings),
// written to an in-memory HDF5 file, read back as the reader does (read_attributes) and checked as
// a resume does (checkpoint_header). Bad metadata must end in CheckpointError; anything else that
// escapes, a crash or a sanitizer report is a bug.
#include <hdf5.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>

#include "io/checkpoint_header.hpp"
#include "io/hdf5_attributes.hpp"
#include "io/hdf5_handle.hpp"
#include "io/parallel_checkpoint.hpp"

namespace {

constexpr std::array<const char*, 11> kNames = {
    "step",           "grid",         "data_windows", "data_shuffle", "data_epoch", "data_position",
    "format_version", "model_family", "deck",         "seed",         "rng"};

class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  template <class T>
  T value() {
    T result{};
    unsigned char bytes[sizeof(T)] = {};
    for (unsigned char& b : bytes) b = byte();
    std::memcpy(&result, bytes, sizeof(T));
    return result;
  }
  std::string text(std::size_t length) {
    std::string result;
    for (std::size_t i = 0; i < length && at_ < size_; ++i) result += static_cast<char>(byte());
    return result;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

trident::Attributes decode(Input& in) {
  trident::Attributes attributes;
  std::set<std::string> names;
  for (int count = in.byte() % 12; count > 0; --count) {
    const std::uint8_t pick = in.byte();
    const std::string name = pick < 200 ? kNames[pick % kNames.size()] : "extra_" + std::to_string(pick);
    const int kind = in.byte() % 3;
    trident::AttributeValue value;
    if (kind == 0) value = in.value<std::int64_t>();
    if (kind == 1) value = in.value<double>();
    if (kind == 2) value = in.text(in.byte() % 40);
    if (names.insert(name).second) attributes.emplace_back(name, value);
  }
  return attributes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in(data, size);
  const trident::Attributes attributes = decode(in);
  trident::silence_hdf5_error_printing();
  const trident::Hdf5Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fapl_core(access.get(), 1 << 16, /*backing_store=*/0);
  const trident::Hdf5Handle file(H5Fcreate("fuzz_metadata.h5", H5F_ACC_TRUNC, H5P_DEFAULT, access.get()), H5Fclose);
  for (const auto& [name, value] : attributes) trident::write_attribute(file.get(), name, value, "fuzz_metadata.h5");
  try {
    (void)trident::checkpoint_header(trident::read_attributes(file.get(), "fuzz_metadata.h5"), "fuzz_metadata.h5");
  } catch (const trident::CheckpointError&) {
  }
  return 0;
}
