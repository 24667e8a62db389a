// Rotary position embedding (Llama, Hugging Face's rotate_half convention): in every head of a
// token at position t, dimension i and i + hd/2 (i < hd/2) form a pair rotated by the angle
// t · theta^(−2i/hd). Backward rotates the gradient back by the same angle.
#pragma once

#include "kernels/device.hpp"
#include "kernels/document_mask.hpp"

namespace trident {

// cos and sin of every (position, pair) angle, [T, hd/2] each, computed once in double.
struct RopeTable {
  RopeTable(int seq_len, int head_dim, double theta);
  FloatBuffer cos, sin;
  int seq_len, head_dim;
};

// x: B·T tokens (token b·T + t at position t, or t − start(t) under packed documents) of `heads`
// heads of table.head_dim columns each, ld floats apart; rotated in place. direction +1 applies the
// embedding, −1 its transpose (the backward pass of a gradient).
void rope_rotate(float* x, const RopeTable& table, int B, int heads, long ld, int direction,
                 const DocumentMask& documents = {});

}  // namespace trident
