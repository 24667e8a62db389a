// The llm.c token shard format: a header of 256 little-endian int32 (magic 20240520, version 1,
// token count, then unused), followed by the tokens as uint16.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trident {

inline constexpr std::int32_t kLlmcShardMagic = 20240520;
inline constexpr std::int32_t kLlmcShardVersion = 1;
inline constexpr int kLlmcShardHeaderInts = 256;

// Reads a whole shard; throws InputError naming the path for a missing file, a wrong magic or
// version, or a size that disagrees with the header's token count.
std::vector<std::int32_t> read_llmc_shard(const std::string& path);

}  // namespace trident
