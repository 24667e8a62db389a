// Packed documents (data.document_mask, DESIGN.md "Packed documents"): several documents share a
// sequence, each closed by the end-of-document token, and a token attends only to earlier tokens of
// its own document, at positions counted from its document's first token (learned positions and
// RoPE alike), as Hugging Face does with position ids. One int per token says where its document
// starts: query t of a sequence sees keys [start(t), t], and its position is t − start(t). Starts
// never decrease along a sequence, which is what lets the tiled kernel skip whole tiles.
#pragma once

#include <cstdint>

namespace trident {

struct DocumentMask {
  // [B·T] each, or null (one document per sequence): the position in its sequence where each
  // token's document starts, on the device and on the host (the host copy decides which tiles run).
  const std::int32_t* starts = nullptr;
  const std::int32_t* host_starts = nullptr;

  explicit operator bool() const { return starts != nullptr; }
};

// starts[t] for one sequence of `T` input tokens: 0 for t = 0, else t after an `eod` token and the
// previous token's start otherwise (the end-of-document token belongs to the document it closes).
inline void document_starts(const std::int32_t* tokens, int T, std::int32_t eod, std::int32_t* starts) {
  for (int t = 0; t < T; ++t) starts[t] = t == 0 ? 0 : tokens[t - 1] == eod ? t : starts[t - 1];
}

}  // namespace trident
