#include "data/megatron_dataset.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>

#include "common/error.hpp"

namespace trident {

namespace {

constexpr std::array<char, 9> kIndexMagic = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr std::uint64_t kIndexVersion = 1;
constexpr std::size_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;

[[noreturn]] void reject(const std::string& key, const std::string& path, const std::string& what) {
  throw InputError(key + ": '" + path + "': " + what +
                   "; data.kind = \"megatron\" expects the .bin/.idx pair that Megatron-LM's "
                   "preprocess_data.py writes, named by their common prefix");
}

template <class T>
T read_at(const MappedFile& file, std::size_t offset) {
  T value;
  std::memcpy(&value, file.data() + offset, sizeof value);
  return value;
}

std::optional<TokenType> token_type_of_code(std::uint8_t code) {
  switch (code) {
    case 1:
      return TokenType::u8;
    case 2:
      return TokenType::i8;
    case 3:
      return TokenType::i16;
    case 4:
      return TokenType::i32;
    case 5:
      return TokenType::i64;
    case 8:
      return TokenType::u16;
    default:
      return std::nullopt;
  }
}

struct IndexSummary {
  TokenType type;
  std::int64_t tokens;
};

// Checks the header and that the sequences lie back to back from the start of .bin (the only
// layout Megatron writes), and returns their token type and total length.
IndexSummary read_index(const MappedFile& index, const std::string& key) {
  const std::string& path = index.path();
  if (index.size() < kHeaderBytes || std::memcmp(index.data(), kIndexMagic.data(), kIndexMagic.size()) != 0)
    reject(key, path, "not a Megatron index (no MMIDIDX header)");
  if (const auto version = read_at<std::uint64_t>(index, 9); version != kIndexVersion)
    reject(key, path, "unsupported index version " + std::to_string(version) + " (expected 1)");
  const auto code = read_at<std::uint8_t>(index, 17);
  const std::optional<TokenType> type = token_type_of_code(code);
  if (!type) {
    reject(key, path,
           "dtype code " + std::to_string(code) +
               (code == 6 || code == 7 ? " is a floating-point type, not token ids"
                                       : " is unknown (integer codes: 1-5, 8)"));
  }
  const auto sequences = read_at<std::uint64_t>(index, 18);
  const auto documents = read_at<std::uint64_t>(index, 26);
  const std::size_t expected = kHeaderBytes + sequences * (4 + 8) + documents * 8;
  if (sequences > index.size() || documents > index.size() || index.size() != expected) {
    reject(key, path,
           "the index is " + std::to_string(index.size()) + " bytes; its header's " + std::to_string(sequences) +
               " sequences and " + std::to_string(documents) + " document indices need " + std::to_string(expected));
  }
  const std::size_t lengths = kHeaderBytes, pointers = lengths + 4 * sequences;
  const int width = token_bytes(*type);
  std::int64_t tokens = 0;
  for (std::size_t i = 0; i < sequences; ++i) {
    const auto length = read_at<std::int32_t>(index, lengths + 4 * i);
    const auto pointer = read_at<std::int64_t>(index, pointers + 8 * i);
    if (length < 0 || pointer != tokens * width)
      reject(key, path,
             "sequence " + std::to_string(i) + " (length " + std::to_string(length) + ", byte offset " +
                 std::to_string(pointer) + ") does not follow the previous one in the .bin file");
    tokens += length;
  }
  return {*type, tokens};
}

}  // namespace

std::unique_ptr<TokenSource> open_megatron_dataset(const std::string& prefix, const std::string& key) {
  const MappedFile index(prefix + ".idx", key);
  const IndexSummary summary = read_index(index, key);
  auto bin = std::make_unique<MappedFile>(prefix + ".bin", key);
  const auto bytes = static_cast<std::size_t>(summary.tokens) * token_bytes(summary.type);
  if (bin->size() != bytes) {
    reject(key, bin->path(),
           "the file is " + std::to_string(bin->size()) + " bytes, but its index describes " +
               std::to_string(summary.tokens) + " " + token_type_name(summary.type) + " tokens (" +
               std::to_string(bytes) + " bytes)");
  }
  return std::make_unique<PackedTokens>(std::move(bin), 0, summary.tokens, summary.type, "Megatron");
}

}  // namespace trident
