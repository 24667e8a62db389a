#include "io/tensor_file.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <map>

#include "common/error.hpp"

namespace trident {

// The files' numbers are little-endian: F32 rows are copied as they are.
static_assert(std::endian::native == std::endian::little, "trident reads weight files on little-endian hosts only");

namespace {

[[noreturn]] void reject(const std::string& path, const std::string& tensor, const std::string& what) {
  throw InputError("'" + path + "': tensor '" + tensor + "' " + what);
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

}  // namespace

// Bytes per element of the fixed-width dtypes of safetensors (torch's storages map to them); 0 for another.
std::size_t dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, std::size_t> widths = {
      {"F64", 8}, {"F32", 4}, {"BF16", 2}, {"F16", 2}, {"I64", 8},  {"I32", 4},     {"I16", 2},    {"I8", 1},
      {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  const auto it = widths.find(dtype);
  return it == widths.end() ? 0 : it->second;
}

TensorFile::TensorFile(const std::string& path) : file_(std::make_unique<MappedFile>(path, "checkpoint.init")) {}

void TensorFile::read(const std::string& name, const TensorSlice& slice) const {
  const auto found = tensors_.find(name);
  if (found == tensors_.end()) throw InputError("'" + path() + "' has no tensor '" + name + "'");
  const StoredTensor& tensor = found->second;
  const Widen widen = widen_for(tensor.dtype);
  if (widen == nullptr) reject(path(), name, "is " + tensor.dtype + "; trident reads F32, BF16 and F16 tensors");
  if (tensor.shape != slice.global_shape)
    reject(path(), name,
           "has shape " + format_shape(tensor.shape) + ", the deck's model needs " + format_shape(slice.global_shape));
  validate_slice(slice);
  const std::size_t width = dtype_bytes(tensor.dtype);
  const unsigned char* data = bytes() + tensor.begin;
  for_each_row(slice, [&](std::uint64_t global, std::uint64_t local, std::int64_t length) {
    widen(data + global * width, length, slice.data + local);
  });
}

}  // namespace trident
