// Rotary position embedding (Llama, Hugging Face's rotate_half convention): in every head of a
// token at position t, dimension i and i + hd/2 (i < hd/2) form a pair rotated by the angle
// t · theta^(−2i/hd). Backward rotates the gradient back by the same angle.
#pragma once

#include <cstdint>

#include "kernels/device.hpp"

namespace trident {

// cos and sin of every (position, pair) angle, [T, hd/2] each, computed once in double.
struct RopeTable {
  RopeTable(int seq_len, int head_dim, double theta);
  FloatBuffer cos, sin;
  int seq_len, head_dim;
};

// x: B·T tokens of `heads` heads of table.head_dim columns each, ld floats apart; rotated in place.
// Token b·T + t is at position positions[b·T + t] where given (its position id: packed documents,
// chunks of a longer sequence), else t. direction +1 applies the embedding, −1 its transpose (the
// backward pass of a gradient).
void rope_rotate(float* x, const RopeTable& table, int B, int T, int heads, long ld, int direction,
                 const std::int32_t* positions = nullptr);

}  // namespace trident
