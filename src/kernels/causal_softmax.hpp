// Row-wise softmax of attention scores under the causal mask: in each T × T block, row t keeps
// columns 0..t and the masked columns t+1.. become exactly 0.
#pragma once

namespace trident {

// In place: scores [blocks, T, T] become probabilities.
void causal_softmax_forward(float* scores, int blocks, int T);

// In place: d [blocks, T, T] holds the gradient w.r.t. the probabilities on entry and the
// gradient w.r.t. the scores on return (0 in the masked columns).
void causal_softmax_backward(float* d, const float* probs, int blocks, int T);

}  // namespace trident
