// Token + position embedding.
#pragma once

namespace trident {

// Whether every one of the n token ids lies in [0, vocab): the embedding and the loss index with them.
bool tokens_in_range(const int* tokens, long n, int vocab);

// out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]   (out [B, T, C], wte [V, C], wpe [T_max, C])
void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C);

// dwte[tokens[b, t], :] += dout[b, t, :];  dwpe[t, :] += dout[b, t, :]
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C);

}  // namespace trident
