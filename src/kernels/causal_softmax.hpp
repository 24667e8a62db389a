// Row-wise softmax of attention scores under the causal mask: in each T × T block, row t keeps
// columns 0..t and the masked columns t+1.. become exactly 0. Under packed documents row t keeps
// columns start(t)..t of its sequence's starts (kernels/document_mask.hpp), blocks being
// [B, heads] (`heads` blocks per sequence).
#pragma once

#include "kernels/document_mask.hpp"

namespace trident {

// In place: scores [blocks, T, T] become probabilities.
void causal_softmax_forward(float* scores, int blocks, int T, const DocumentMask& documents = {}, int heads = 1);

// In place: d [blocks, T, T] holds the gradient w.r.t. the probabilities on entry and the
// gradient w.r.t. the scores on return (0 in the masked columns).
void causal_softmax_backward(float* d, const float* probs, int blocks, int T, const DocumentMask& documents = {},
                             int heads = 1);

}  // namespace trident
