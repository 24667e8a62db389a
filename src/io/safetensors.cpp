#include "io/safetensors.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/error.hpp"

namespace trident {

// The file's numbers are little-endian: F32 rows are copied as they are.
static_assert(std::endian::native == std::endian::little, "trident reads safetensors on little-endian hosts only");

namespace {

using nlohmann::json;

constexpr std::size_t kLengthBytes = 8;  // the header length's uint64

[[noreturn]] void reject(const std::string& path, const std::string& what) {
  throw InputError("safetensors file '" + path + "': " + what);
}

[[noreturn]] void reject(const std::string& path, const std::string& tensor, const std::string& what) {
  reject(path, "tensor '" + tensor + "' " + what);
}

// Bytes per element of the format's fixed-width dtypes; 0 for another (not checked, not read).
std::size_t dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, std::size_t> widths = {
      {"F64", 8}, {"F32", 4}, {"BF16", 2}, {"F16", 2}, {"I64", 8},  {"I32", 4},     {"I16", 2},    {"I8", 1},
      {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  const auto it = widths.find(dtype);
  return it == widths.end() ? 0 : it->second;
}

std::uint16_t half_bits(const unsigned char* bytes) {
  std::uint16_t bits;
  std::memcpy(&bits, bytes, sizeof bits);
  return bits;
}

float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return std::bit_cast<float>(sign | 0x7F800000u | mantissa << 13);         // inf, NaN
  if (exponent != 0) return std::bit_cast<float>(sign | (exponent + 112) << 23 | mantissa << 13);  // rebias 15 -> 127
  const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);                           // subnormal or zero
  return sign ? -magnitude : magnitude;
}

void widen_f32(const unsigned char* bytes, std::int64_t n, float* out) {
  std::memcpy(out, bytes, static_cast<std::size_t>(n) * sizeof(float));
}

void widen_bf16(const unsigned char* bytes, std::int64_t n, float* out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(std::uint32_t{half_bits(bytes + 2 * i)} << 16);
}

void widen_f16(const unsigned char* bytes, std::int64_t n, float* out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = f16_to_float(half_bits(bytes + 2 * i));
}

using Widen = void (*)(const unsigned char*, std::int64_t, float*);

Widen widen_for(const std::string& dtype) {
  if (dtype == "F32") return widen_f32;
  if (dtype == "BF16") return widen_bf16;
  if (dtype == "F16") return widen_f16;
  return nullptr;
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
                   SafetensorsTensor& tensor) {
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
void check_size(const std::string& path, const std::string& name, const SafetensorsTensor& tensor) {
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

SafetensorsTensor parse_entry(const std::string& path, const std::string& name, const json& entry,
                              std::size_t data_bytes) {
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
    reject(path, name, "is " + entry.dump() + ", not an object with dtype, shape and data_offsets");
  if (!entry["dtype"].is_string()) reject(path, name, "has dtype " + entry["dtype"].dump() + ", not a string");
  SafetensorsTensor tensor{entry["dtype"].get<std::string>(), parse_shape(path, name, entry["shape"])};
  parse_offsets(path, name, entry["data_offsets"], data_bytes, tensor);
  check_size(path, name, tensor);
  return tensor;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path)
    : file_(std::make_unique<MappedFile>(path, "checkpoint.init")) {
  const std::size_t size = file_->size();
  if (size < kLengthBytes)
    reject(path, "the file holds " + std::to_string(size) + " bytes, fewer than the 8-byte header length");
  std::uint64_t length = 0;
  for (std::size_t i = kLengthBytes; i-- > 0;) length = length << 8 | file_->data()[i];
  if (length > size - kLengthBytes)
    reject(path, "the header length " + std::to_string(length) + " runs past the end of the file (" +
                     std::to_string(size) + " bytes): truncated, or not a safetensors file");
  const json header = parse_header(path, file_->data() + kLengthBytes, length);
  if (!header.is_object()) reject(path, "the header is a JSON " + std::string(header.type_name()) + ", not an object");
  const std::size_t data_start = kLengthBytes + length;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;  // free-form strings (format, framework): nothing to read
    SafetensorsTensor tensor = parse_entry(path, name, entry, size - data_start);
    tensor.begin += data_start;
    tensor.end += data_start;
    tensors_.emplace(name, std::move(tensor));
  }
}

void SafetensorsFile::read(const std::string& name, const TensorSlice& slice) const {
  const auto found = tensors_.find(name);
  if (found == tensors_.end()) reject(path(), "has no tensor '" + name + "'");
  const SafetensorsTensor& tensor = found->second;
  const Widen widen = widen_for(tensor.dtype);
  if (widen == nullptr) reject(path(), name, "is " + tensor.dtype + "; trident reads F32, BF16 and F16 tensors");
  if (tensor.shape != slice.global_shape)
    reject(path(), name,
           "has shape " + format_shape(tensor.shape) + ", the deck's model needs " + format_shape(slice.global_shape));
  validate_slice(slice);
  const std::size_t width = dtype_bytes(tensor.dtype);
  const unsigned char* data = file_->data() + tensor.begin;
  for_each_row(slice, [&](std::uint64_t global, std::uint64_t local, std::int64_t length) {
    widen(data + global * width, length, slice.data + local);
  });
}

}  // namespace trident
