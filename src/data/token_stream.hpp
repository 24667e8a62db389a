// The token data a run reads (DESIGN.md "Token data"): the files that data.path (or eval.path)
// lists, in order, as one stream, or the synthetic generator's tokens. Files are memory-mapped,
// never read whole: a rank touches only the pages of the windows it trains on.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/token_source.hpp"
#include "deck/config.hpp"

namespace trident {

class TokenStream {
 public:
  // `key` names the deck key the sources came from, for messages.
  TokenStream(std::vector<std::shared_ptr<const TokenSource>> sources, int vocab, std::string key);

  std::int64_t size() const { return offsets_.back(); }
  // Tokens [first, first + count) of the stream, across file boundaries. Throws InputError naming
  // the file, the position in it and model.vocab for an id that is negative or not below vocab
  // (checked as windows are read, so that a large corpus is never scanned whole).
  void read(std::int64_t first, std::int64_t count, std::int32_t* out) const;
  // "data.path: shard_000.bin (llm.c, uint16) + 2 more files, 1,234,567 tokens".
  std::string describe() const;
  const std::string& key() const { return key_; }

 private:
  void check_ids(std::size_t source, std::int64_t first, const std::int64_t* ids, std::int64_t count) const;

  std::vector<std::shared_ptr<const TokenSource>> sources_;
  std::vector<std::int64_t> offsets_;  // offsets_[i]: where source i starts; back(): the total
  int vocab_;
  std::string key_;
};

// The training stream of [data]: data.paths (already expanded by the deck) in order, or
// data.synthetic_tokens tokens of the generator seeded with `seed` (train.seed).
TokenStream load_tokens(const DataConfig& data, int vocab, std::uint64_t seed);

// The held-out stream of [eval]: eval.paths read as data.kind says, or, for synthetic data, the
// `count` tokens that follow the training stream in the generator's chain (same distribution,
// never trained on).
TokenStream load_eval_tokens(const DataConfig& data, const EvalConfig& eval, int vocab, std::uint64_t seed,
                             std::int64_t count);

}  // namespace trident
