#include "data/token_stream.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "data/file_bytes.hpp"
#include "data/llmc_shard.hpp"
#include "data/synthetic.hpp"

namespace trident {

namespace {

// The embedding table has `vocab` rows, so a larger id would read past it.
void require_below_vocab(const TokenStream& stream, int vocab) {
  const auto bad = std::find_if(stream.tokens.begin(), stream.tokens.end(),
                                [vocab](std::int32_t token) { return token >= vocab; });
  if (bad == stream.tokens.end()) return;
  const std::int32_t largest = *std::max_element(stream.tokens.begin(), stream.tokens.end());
  throw InputError(stream.source + ": token id " + std::to_string(*bad) + " at position " +
                   std::to_string(bad - stream.tokens.begin()) + " is not below model.vocab = " +
                   std::to_string(vocab) + "; set model.vocab to at least " + std::to_string(largest + 1) +
                   " (the largest id in the file + 1)");
}

}  // namespace

TokenStream load_tokens(const DataConfig& data, int vocab, std::uint64_t seed) {
  TokenStream stream;
  switch (data.kind) {
    case DataKind::bin:
      stream.tokens = read_llmc_shard(data.path);
      stream.source = data.path;
      break;
    case DataKind::text: {
      const std::vector<unsigned char> bytes = read_file_bytes(data.path);
      stream.tokens.assign(bytes.begin(), bytes.end());
      stream.source = data.path;
      break;
    }
    case DataKind::synthetic:
      stream.tokens = synthetic_tokens(data.synthetic_tokens, vocab, seed);
      stream.source = "synthetic(seed " + std::to_string(seed) + ", " + std::to_string(data.synthetic_tokens) +
                      " tokens)";
      break;
  }
  require_below_vocab(stream, vocab);
  return stream;
}

}  // namespace trident
