#include "data/token_source.hpp"

#include <cstring>

namespace trident {

namespace {

template <class Int>
void unpack(const unsigned char* bytes, std::int64_t count, std::int64_t* out) {
  for (std::int64_t i = 0; i < count; ++i) {
    Int value;
    std::memcpy(&value, bytes + i * static_cast<std::int64_t>(sizeof(Int)), sizeof(Int));
    out[i] = static_cast<std::int64_t>(value);
  }
}

}  // namespace

int token_bytes(TokenType type) {
  switch (type) {
    case TokenType::u8:
    case TokenType::i8:
      return 1;
    case TokenType::u16:
    case TokenType::i16:
      return 2;
    case TokenType::u32:
    case TokenType::i32:
      return 4;
    case TokenType::i64:
      return 8;
  }
  return 0;
}

std::string token_type_name(TokenType type) {
  switch (type) {
    case TokenType::u8:
      return "uint8";
    case TokenType::i8:
      return "int8";
    case TokenType::u16:
      return "uint16";
    case TokenType::i16:
      return "int16";
    case TokenType::u32:
      return "uint32";
    case TokenType::i32:
      return "int32";
    case TokenType::i64:
      return "int64";
  }
  return "?";
}

PackedTokens::PackedTokens(std::unique_ptr<MappedFile> file, std::size_t offset, std::int64_t count, TokenType type,
                           std::string format)
    : file_(std::move(file)), offset_(offset), count_(count), type_(type), format_(std::move(format)) {}

void PackedTokens::read(std::int64_t first, std::int64_t count, std::int64_t* out) const {
  const unsigned char* start = file_->data() + offset_ + first * token_bytes(type_);
  switch (type_) {
    case TokenType::u8:
      return unpack<std::uint8_t>(start, count, out);
    case TokenType::i8:
      return unpack<std::int8_t>(start, count, out);
    case TokenType::u16:
      return unpack<std::uint16_t>(start, count, out);
    case TokenType::i16:
      return unpack<std::int16_t>(start, count, out);
    case TokenType::u32:
      return unpack<std::uint32_t>(start, count, out);
    case TokenType::i32:
      return unpack<std::int32_t>(start, count, out);
    case TokenType::i64:
      return unpack<std::int64_t>(start, count, out);
  }
}

std::string PackedTokens::describe() const {
  return file_->path() + " (" + format_ + ", " + token_type_name(type_) + ")";
}

void MemoryTokens::read(std::int64_t first, std::int64_t count, std::int64_t* out) const {
  for (std::int64_t i = 0; i < count; ++i) out[i] = tokens_[static_cast<std::size_t>(first + i)];
}

}  // namespace trident
