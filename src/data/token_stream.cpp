#include "data/token_stream.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "data/llmc_shard.hpp"
#include "data/megatron_dataset.hpp"
#include "data/synthetic.hpp"

namespace trident {

namespace {

// data.kind = "text": every byte of the file is a token.
std::shared_ptr<const TokenSource> open_text_file(const std::string& path, const std::string& key) {
  auto file = std::make_unique<MappedFile>(path, key);
  const auto bytes = static_cast<std::int64_t>(file->size());
  return std::make_shared<PackedTokens>(std::move(file), 0, bytes, TokenType::u8, "text");
}

std::shared_ptr<const TokenSource> open_source(DataKind kind, const std::string& path, const std::string& key) {
  switch (kind) {
    case DataKind::bin:
      return open_llmc_shard(path, key);
    case DataKind::megatron:
      return open_megatron_dataset(path, key);
    case DataKind::text:
      return open_text_file(path, key);
    case DataKind::synthetic:
      break;
  }
  throw std::logic_error("open_source: synthetic data has no files");
}

TokenStream open_files(DataKind kind, const std::vector<std::string>& paths, int vocab, const std::string& key) {
  std::vector<std::shared_ptr<const TokenSource>> sources;
  for (const std::string& path : paths) sources.push_back(open_source(kind, path, key));
  return TokenStream(std::move(sources), vocab, key);
}

std::string synthetic_description(std::uint64_t seed, std::int64_t first, std::int64_t count) {
  return "synthetic(seed " + std::to_string(seed) + ", tokens " + std::to_string(first) + ".." +
         std::to_string(first + count - 1) + ")";
}

}  // namespace

TokenStream::TokenStream(std::vector<std::shared_ptr<const TokenSource>> sources, int vocab, std::string key)
    : sources_(std::move(sources)), offsets_{0}, vocab_(vocab), key_(std::move(key)) {
  for (const auto& source : sources_) offsets_.push_back(offsets_.back() + source->size());
}

void TokenStream::read(std::int64_t first, std::int64_t count, std::int32_t* out) const {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(count));
  std::int64_t done = 0;
  auto source =
      static_cast<std::size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), first) - offsets_.begin() - 1);
  while (done < count) {
    const std::int64_t at = first + done - offsets_[source];
    const std::int64_t take = std::min(count - done, sources_[source]->size() - at);
    sources_[source]->read(at, take, ids.data() + done);
    check_ids(source, at, ids.data() + done, take);
    done += take;
    ++source;
  }
  std::copy(ids.begin(), ids.end(), out);
}

// The embedding table has `vocab` rows, so a larger id would read past it.
void TokenStream::check_ids(std::size_t source, std::int64_t first, const std::int64_t* ids, std::int64_t count) const {
  const std::int64_t* bad = std::find_if(ids, ids + count, [&](std::int64_t id) { return id < 0 || id >= vocab_; });
  if (bad == ids + count) return;
  throw InputError(sources_[source]->describe() + ": token id " + std::to_string(*bad) + " at position " +
                   std::to_string(first + (bad - ids)) + " is not in [0, model.vocab = " + std::to_string(vocab_) +
                   "); set model.vocab to at least the largest id + 1, or use the tokenizer the deck's model was "
                   "made for");
}

std::string TokenStream::describe() const {
  std::string text = key_ + ": " + (sources_.empty() ? "no files" : sources_.front()->describe());
  if (sources_.size() > 1) text += " + " + std::to_string(sources_.size() - 1) + " more";
  return text + ", " + std::to_string(size()) + " tokens";
}

TokenStream load_tokens(const DataConfig& data, int vocab, std::uint64_t seed) {
  if (data.kind != DataKind::synthetic) return open_files(data.kind, data.paths, vocab, "data.path");
  auto tokens = std::make_shared<MemoryTokens>(synthetic_tokens(data.synthetic_tokens, vocab, seed),
                                               synthetic_description(seed, 0, data.synthetic_tokens));
  return TokenStream({std::move(tokens)}, vocab, "data.synthetic_tokens");
}

TokenStream load_eval_tokens(const DataConfig& data, const EvalConfig& eval, int vocab, std::uint64_t seed,
                             std::int64_t count) {
  if (data.kind != DataKind::synthetic) return open_files(data.kind, eval.paths, vocab, "eval.path");
  std::vector<std::int32_t> chain = synthetic_tokens(data.synthetic_tokens + count, vocab, seed);
  chain.erase(chain.begin(), chain.begin() + data.synthetic_tokens);
  auto tokens =
      std::make_shared<MemoryTokens>(std::move(chain), synthetic_description(seed, data.synthetic_tokens, count));
  return TokenStream({std::move(tokens)}, vocab, "eval (held-out synthetic)");
}

}  // namespace trident
