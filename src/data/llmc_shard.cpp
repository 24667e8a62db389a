#include "data/llmc_shard.hpp"

#include <cstring>

#include "common/error.hpp"
#include "data/file_bytes.hpp"

namespace trident {

namespace {

[[noreturn]] void reject(const std::string& path, const std::string& what) {
  throw InputError("data.path = '" + path + "': " + what +
                   "; data.kind = \"bin\" expects an llm.c token shard (256 x int32 header: magic " +
                   std::to_string(kLlmcShardMagic) + ", version " + std::to_string(kLlmcShardVersion) +
                   ", token count; then uint16 tokens)");
}

}  // namespace

std::vector<std::int32_t> read_llmc_shard(const std::string& path) {
  const std::vector<unsigned char> bytes = read_file_bytes(path);
  constexpr std::size_t header_bytes = kLlmcShardHeaderInts * sizeof(std::int32_t);
  if (bytes.size() < header_bytes) {
    reject(path, "truncated: the file holds " + std::to_string(bytes.size()) +
                     " bytes, fewer than the " + std::to_string(header_bytes) + "-byte header");
  }
  std::int32_t header[kLlmcShardHeaderInts];
  std::memcpy(header, bytes.data(), header_bytes);
  if (header[0] != kLlmcShardMagic) {
    reject(path, "wrong magic number " + std::to_string(header[0]) + " (expected " +
                     std::to_string(kLlmcShardMagic) + ")");
  }
  if (header[1] != kLlmcShardVersion) {
    reject(path, "unsupported version " + std::to_string(header[1]) + " (expected " +
                     std::to_string(kLlmcShardVersion) + ")");
  }
  if (header[2] < 0) reject(path, "negative token count " + std::to_string(header[2]) + " in the header");

  const auto count = static_cast<std::size_t>(header[2]);
  const std::size_t held = (bytes.size() - header_bytes) / sizeof(std::uint16_t);
  if (held < count) {
    reject(path, "truncated: the header says " + std::to_string(count) + " tokens, the file holds only " +
                     std::to_string(held));
  }
  if (bytes.size() != header_bytes + count * sizeof(std::uint16_t)) {
    reject(path, "the file is " + std::to_string(bytes.size()) + " bytes, the header's " +
                     std::to_string(count) + " tokens need exactly " +
                     std::to_string(header_bytes + count * sizeof(std::uint16_t)));
  }

  std::vector<std::int32_t> tokens(count);
  const unsigned char* payload = bytes.data() + header_bytes;
  for (std::size_t i = 0; i < count; ++i) {
    std::uint16_t token;
    std::memcpy(&token, payload + i * sizeof token, sizeof token);
    tokens[i] = token;
  }
  return tokens;
}

}  // namespace trident
