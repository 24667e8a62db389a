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

// Where a micro-batch's tokens sit in their sequences, where that is not simply t: their position
// ids (Hugging Face's position_ids, which the position table and RoPE read) and their documents. A
// rank of a context-parallel group holds two chunks of each sequence (model/ring_attention.hpp):
// its ids are then positions in the whole sequence, as are the documents' starts.
struct TokenPositions {
  const std::int32_t* ids = nullptr;  // [B·T] on the device, or null: token b·T + t at position t
  DocumentMask documents = {};        // packed documents, or none
};

// Context parallelism's cut of a sequence of T positions into 2·size chunks of L = T / (2·size):
// rank r of the cp group holds chunks r and 2·size − 1 − r, in that order, as its 2·L local rows
// (every rank then has the same causal work).
struct ContextChunks {
  int rank = 0, size = 1;

  int chunk(int local_chunk) const { return local_chunk == 0 ? rank : 2 * size - 1 - rank; }
  // The position in the whole sequence of local row `row` of 2·L.
  int position(int row, int L) const { return chunk(row / L) * L + row % L; }
};

// starts[t] for one sequence of `T` input tokens: 0 for t = 0, else t after an `eod` token and the
// previous token's start otherwise (the end-of-document token belongs to the document it closes).
inline void document_starts(const std::int32_t* tokens, int T, std::int32_t eod, std::int32_t* starts) {
  for (int t = 0; t < T; ++t) starts[t] = t == 0 ? 0 : tokens[t - 1] == eod ? t : starts[t - 1];
}

}  // namespace trident
