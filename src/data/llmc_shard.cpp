#include "data/llmc_shard.hpp"

#include <cstring>

#include "common/error.hpp"

namespace trident {

namespace {

[[noreturn]] void reject(const std::string& key, const std::string& path, const std::string& what) {
  throw InputError(key + " = '" + path + "': " + what +
                   "; data.kind = \"bin\" expects an llm.c token shard (256 x int32 header: magic " +
                   std::to_string(kLlmcShard16.magic) + " version " + std::to_string(kLlmcShard16.version) +
                   " for uint16 tokens, or magic " + std::to_string(kLlmcShard32.magic) + " version " +
                   std::to_string(kLlmcShard32.version) + " for uint32; then the token count; then the tokens)");
}

const LlmcShardVariant& variant_of(const std::int32_t* header, const std::string& key, const std::string& path) {
  for (const LlmcShardVariant& variant : {std::cref(kLlmcShard16), std::cref(kLlmcShard32)}) {
    if (header[0] != variant.magic) continue;
    if (header[1] != variant.version) {
      reject(key, path,
             "unsupported version " + std::to_string(header[1]) + " for magic " + std::to_string(variant.magic) +
                 " (expected " + std::to_string(variant.version) + ")");
    }
    return variant;
  }
  reject(key, path, "wrong magic number " + std::to_string(header[0]));
}

}  // namespace

std::unique_ptr<TokenSource> open_llmc_shard(const std::string& path, const std::string& key) {
  auto file = std::make_unique<MappedFile>(path, key);
  constexpr std::size_t header_bytes = kLlmcShardHeaderInts * sizeof(std::int32_t);
  if (file->size() < header_bytes) {
    reject(key, path,
           "truncated: the file holds " + std::to_string(file->size()) + " bytes, fewer than the " +
               std::to_string(header_bytes) + "-byte header");
  }
  std::int32_t header[kLlmcShardHeaderInts];
  std::memcpy(header, file->data(), header_bytes);
  const LlmcShardVariant& variant = variant_of(header, key, path);
  if (header[2] < 0) reject(key, path, "negative token count " + std::to_string(header[2]) + " in the header");

  const auto count = static_cast<std::size_t>(header[2]);
  const std::size_t width = static_cast<std::size_t>(token_bytes(variant.type));
  const std::size_t held = (file->size() - header_bytes) / width;
  if (held < count) {
    reject(
        key, path,
        "truncated: the header says " + std::to_string(count) + " tokens, the file holds only " + std::to_string(held));
  }
  if (file->size() != header_bytes + count * width) {
    reject(key, path,
           "the file is " + std::to_string(file->size()) + " bytes, the header's " + std::to_string(count) +
               " tokens need exactly " + std::to_string(header_bytes + count * width));
  }
  return std::make_unique<PackedTokens>(std::move(file), header_bytes, static_cast<std::int64_t>(count), variant.type,
                                        "llm.c");
}

}  // namespace trident
