// Token + position embedding.
#pragma once

#include <cstdint>

namespace trident {

// wte holds the embeddings of vocab ids [vocab_first, vocab_first + vocab_rows) (all of them, or
// one tensor-parallel rank's rows): a token outside that range contributes 0, so the sum over the
// TP group of every rank's output is the full embedding.
//
// out[b, t, :] = wte[tokens[b, t] − vocab_first, :] + wpe[p(b, t), :]   (out [B, T, C], wte [vocab_rows, C],
// wpe [T_max, C]); wpe may be null (no position term), so that one rank of a TP group adds it.
// p(b, t) = positions[b·T + t], each token's position id, where given (packed documents, chunks
// of a longer sequence: kernels/document_mask.hpp), else t.
void encoder_forward(float* out, const int* tokens, const float* wte, int vocab_first, int vocab_rows,
                     const float* wpe, int B, int T, int C, const std::int32_t* positions = nullptr);

// dwte[tokens[b, t] − vocab_first, :] += dout[b, t, :] for the tokens held;  dwpe[p(b, t), :] += dout[b, t, :]
// (dwpe may be null: no position table)
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int vocab_first,
                      int vocab_rows, int B, int T, int C, const std::int32_t* positions = nullptr);

}  // namespace trident
