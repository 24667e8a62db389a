// llm.c's token shard format: a header of 256 little-endian int32 (magic, version, token count,
// then unused), followed by the tokens. Two variants, as llm.c's dev/data/data_common.py writes
// them: magic 20240520 version 1 with uint16 tokens (GPT-2 sized vocabularies) and magic
// 20240801 version 7 with uint32 tokens (Llama 3's 128,256 and larger).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "data/token_source.hpp"

namespace trident {

inline constexpr int kLlmcShardHeaderInts = 256;

struct LlmcShardVariant {
  std::int32_t magic;
  std::int32_t version;
  TokenType type;
};
inline constexpr LlmcShardVariant kLlmcShard16{20240520, 1, TokenType::u16};
inline constexpr LlmcShardVariant kLlmcShard32{20240801, 7, TokenType::u32};

// Maps the shard at `path` (named by deck key `key`); throws InputError naming the path for a
// missing file, an unknown magic or version, or a size that disagrees with the header's count.
std::unique_ptr<TokenSource> open_llmc_shard(const std::string& path, const std::string& key);

}  // namespace trident
