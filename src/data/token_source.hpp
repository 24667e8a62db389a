// One file's tokens (or a generated stream), read on demand by position. The file formats of
// DESIGN.md "Token data" differ only in their headers: each one's reader (llmc_shard.hpp,
// megatron_dataset.hpp, token_stream.cpp for text) finds where the packed integers start, how
// wide they are and how many there are, and hands back a PackedTokens over the mapped file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/mapped_file.hpp"

namespace trident {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual std::int64_t size() const = 0;
  // Tokens [first, first + count) to `out`; the range lies within size().
  virtual void read(std::int64_t first, std::int64_t count, std::int64_t* out) const = 0;
  // "shard_000.bin (llm.c uint16)": where the tokens come from and how they are stored.
  virtual std::string describe() const = 0;
};

// The integer types token files store.
enum class TokenType { u8, i8, u16, i16, u32, i32, i64 };
int token_bytes(TokenType type);
std::string token_type_name(TokenType type);  // "uint16", ...

// `count` little-endian integers of `type` starting `offset` bytes into a mapped file. The
// reader that found them has checked that they lie within the file.
class PackedTokens : public TokenSource {
 public:
  PackedTokens(std::unique_ptr<MappedFile> file, std::size_t offset, std::int64_t count, TokenType type,
               std::string format);

  std::int64_t size() const override { return count_; }
  void read(std::int64_t first, std::int64_t count, std::int64_t* out) const override;
  std::string describe() const override;

 private:
  std::unique_ptr<MappedFile> file_;
  std::size_t offset_;
  std::int64_t count_;
  TokenType type_;
  std::string format_;  // "llm.c", "Megatron", "text"
};

// Tokens held in memory (the synthetic generator's).
class MemoryTokens : public TokenSource {
 public:
  MemoryTokens(std::vector<std::int32_t> tokens, std::string description)
      : tokens_(std::move(tokens)), description_(std::move(description)) {}

  std::int64_t size() const override { return static_cast<std::int64_t>(tokens_.size()); }
  void read(std::int64_t first, std::int64_t count, std::int64_t* out) const override;
  std::string describe() const override { return description_; }

 private:
  std::vector<std::int32_t> tokens_;
  std::string description_;
};

}  // namespace trident
