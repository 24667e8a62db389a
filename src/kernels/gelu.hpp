// GELU, tanh approximation (GPT-2): gelu(x) = ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
#pragma once

namespace trident {

void gelu_forward(float* out, const float* x, long n);

// dx = dout · gelu'(x); dx may alias dout.
void gelu_backward(float* dx, const float* x, const float* dout, long n);

}  // namespace trident
