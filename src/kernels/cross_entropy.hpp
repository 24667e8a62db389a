// Softmax + cross-entropy over the vocabulary, fused with its gradient: the logits are read once
// and replaced by d(Σ losses)/d(logits) = softmax(logits) − onehot(target). The backward pass then
// only scales that by loss_scale, which the tied head's gemm() does through its alpha.
#pragma once

namespace trident {

// For each of `rows` rows of V logits: losses[r] = −log softmax(logits[r])[targets[r]], and
// logits[r] is overwritten with softmax(logits[r]) − onehot(targets[r]). Returns Σ losses.
double softmax_cross_entropy(float* logits, float* losses, const int* targets, int rows, int V);

}  // namespace trident
