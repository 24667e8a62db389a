// SwiGLU, the gate of Llama's MLP: h = silu(gate) · up, elementwise, silu(g) = g · sigmoid(g).
#pragma once

namespace trident {

void swiglu_forward(float* h, const float* gate, const float* up, long n);

// dgate = dh · up · silu'(gate), dup = dh · silu(gate) (both overwritten; either may alias dh).
void swiglu_backward(float* dgate, float* dup, const float* dh, const float* gate, const float* up, long n);

}  // namespace trident
