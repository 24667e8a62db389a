// Token + position embedding.
#pragma once

namespace trident {

// out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]   (out [B, T, C], wte [V, C], wpe [T_max, C])
void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C);

// dwte[tokens[b, t], :] += dout[b, t, :];  dwpe[t, :] += dout[b, t, :]
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C);

}  // namespace trident
