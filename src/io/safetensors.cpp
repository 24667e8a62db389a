#include "io/safetensors.hpp"

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/error.hpp"

namespace trident {

namespace {

using nlohmann::json;

constexpr std::size_t kLengthBytes = 8;  // the header length's uint64

[[noreturn]] void reject(const std::string& path, const std::string& what) {
  throw InputError("safetensors file '" + path + "': " + what);
}

[[noreturn]] void reject(const std::string& path, const std::string& tensor, const std::string& what) {
  reject(path, "tensor '" + tensor + "' " + what);
}

json parse_header(const std::string& path, const unsigned char* text, std::size_t length) {
  try {
    return json::parse(text, text + length);
  } catch (const json::exception& error) {  // a syntax error, or a number past double's range
    reject(path, "the header is not valid JSON (" + std::string(error.what()) + ")");
  }
}

std::vector<std::int64_t> parse_shape(const std::string& path, const std::string& name, const json& shape) {
  const auto fail = [&](const std::string& what) { reject(path, name, "has shape " + shape.dump() + ": " + what); };
  if (!shape.is_array()) fail("not an array of dimensions");
  std::vector<std::int64_t> extents;
  for (const json& extent : shape) {
    if (!extent.is_number_integer()) fail("not an array of integers");
    if (!extent.is_number_unsigned()) fail("a negative dimension");
    if (extent.get<std::uint64_t>() > std::numeric_limits<std::int64_t>::max()) fail("a dimension past 2^63");
    extents.push_back(extent.get<std::int64_t>());
  }
  return extents;
}

// product(shape) * width, or nothing when it does not fit 64 bits.
std::optional<std::uint64_t> shape_bytes(const std::vector<std::int64_t>& shape, std::uint64_t width) {
  for (std::int64_t extent : shape)
    if (extent == 0) return 0;
  std::uint64_t bytes = width;
  for (std::int64_t extent : shape)
    if (__builtin_mul_overflow(bytes, static_cast<std::uint64_t>(extent), &bytes)) return std::nullopt;
  return bytes;
}

std::string byte_range(std::size_t begin, std::size_t end) {
  std::string range = "[";  // appended piecewise: GCC 12 warns falsely (-Wrestrict) on "[" + std::string&&
  range += std::to_string(begin) + ", " + std::to_string(end) + ")";
  return range;
}

// Sets tensor.begin and tensor.end from data_offsets, relative to the data's first byte.
void parse_offsets(const std::string& path, const std::string& name, const json& offsets, std::size_t data_bytes,
                   StoredTensor& tensor) {
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    reject(path, name, "has data_offsets " + offsets.dump() + ", not two non-negative integers [begin, end]");
  const auto begin = offsets[0].get<std::uint64_t>(), end = offsets[1].get<std::uint64_t>();
  if (end < begin) reject(path, name, "has data_offsets " + byte_range(begin, end) + " that end before they begin");
  if (end > data_bytes)
    reject(path, name,
           "names bytes " + byte_range(begin, end) + " but the file holds only " + std::to_string(data_bytes) +
               " data bytes: truncated?");
  tensor.begin = static_cast<std::size_t>(begin);
  tensor.end = static_cast<std::size_t>(end);
}

// The data's size follows from shape and dtype for the fixed-width dtypes.
void check_size(const std::string& path, const std::string& name, const StoredTensor& tensor) {
  const std::size_t width = dtype_bytes(tensor.dtype);
  if (width == 0) return;  // a dtype trident does not read: its size is not ours to check
  const std::optional<std::uint64_t> bytes = shape_bytes(tensor.shape, width);
  const std::string what = tensor.dtype + " of shape " + format_shape(tensor.shape);
  if (!bytes) reject(path, name, "is " + what + ", more bytes than 64 bits count");
  if (*bytes != tensor.end - tensor.begin)
    reject(path, name,
           "is " + what + " (" + std::to_string(*bytes) + " bytes) but data_offsets " +
               byte_range(tensor.begin, tensor.end) + " hold " + std::to_string(tensor.end - tensor.begin));
}

StoredTensor parse_entry(const std::string& path, const std::string& name, const json& entry,
                              std::size_t data_bytes) {
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
    reject(path, name, "is " + entry.dump() + ", not an object with dtype, shape and data_offsets");
  if (!entry["dtype"].is_string()) reject(path, name, "has dtype " + entry["dtype"].dump() + ", not a string");
  StoredTensor tensor{entry["dtype"].get<std::string>(), parse_shape(path, name, entry["shape"])};
  parse_offsets(path, name, entry["data_offsets"], data_bytes, tensor);
  check_size(path, name, tensor);
  return tensor;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : TensorFile(path) {
  const std::size_t size = this->size();
  if (size < kLengthBytes)
    reject(path, "the file holds " + std::to_string(size) + " bytes, fewer than the 8-byte header length");
  std::uint64_t length = 0;
  for (std::size_t i = kLengthBytes; i-- > 0;) length = length << 8 | bytes()[i];
  if (length > size - kLengthBytes)
    reject(path, "the header length " + std::to_string(length) + " runs past the end of the file (" +
                     std::to_string(size) + " bytes): truncated, or not a safetensors file");
  const json header = parse_header(path, bytes() + kLengthBytes, length);
  if (!header.is_object()) reject(path, "the header is a JSON " + std::string(header.type_name()) + ", not an object");
  const std::size_t data_start = kLengthBytes + length;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;  // free-form strings (format, framework): nothing to read
    StoredTensor tensor = parse_entry(path, name, entry, size - data_start);
    tensor.begin += data_start;
    tensor.end += data_start;
    tensors_.emplace(name, std::move(tensor));
  }
}

}  // namespace trident
