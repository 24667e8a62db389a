// Residual connection. Its backward pass needs no kernel: the gradient of out flows unchanged to
// both inputs, so callers pass the same gradient buffer on.
#pragma once

namespace trident {

// out = a + b, elementwise over n values.
void residual_forward(float* out, const float* a, const float* b, long n);

}  // namespace trident
