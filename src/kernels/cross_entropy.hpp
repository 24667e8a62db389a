// Softmax + cross-entropy over the vocabulary, fused with its gradient: the logits are read once
// and replaced by d(Σ losses)/d(logits) = softmax(logits) − onehot(target). The backward pass then
// only scales that by loss_scale, which the tied head's gemm() does through its alpha.
#pragma once

namespace trident {

// For each of `rows` rows of V logits: losses[r] = −log softmax(logits[r])[targets[r]], and
// logits[r] is overwritten with softmax(logits[r]) − onehot(targets[r]). *loss_sum (one device
// double) = Σ losses, left on the device. A target outside [0, V) makes its row's loss NaN (the
// data layer rejects such ids as it reads them; this keeps a stray one from reading past the row).
void softmax_cross_entropy(float* logits, float* losses, const int* targets, int rows, int V, double* loss_sum);

// The same over a vocabulary split into shards (vocab-parallel cross-entropy, Megatron style):
// each shard holds, per row, the logits of `columns` consecutive vocab ids starting at `first`
// (row stride ld). Two passes, with an exchange of per-row statistics between them:
//
// softmax_shard_statistics: per row, stats[r] = m = the largest logit, stats[rows + r] = Σ exp(logit − m),
// stats[2·rows + r] = the target's logit if this shard holds it, else 0; logits become exp(logit − m).
// A shard without columns gives m = −FLT_MAX and sum 0, so it drops out of the combination.
void softmax_shard_statistics(float* logits, float* stats, const int* targets, int rows, int columns, int ld, int first);

// all_stats: the stats of all `shards` shards, one after the other ([shards][3][rows]). Combines them
// into each row's global max M and sum S = Σ_s sum_s · exp(m_s − M), writes losses[r] = log S + M −
// (target's logit), and turns this shard's exponentials into softmax − onehot(target). *loss_sum
// (one device double) = Σ losses, the same on every shard.
void softmax_shard_finish(float* logits, float* losses, const float* all_stats, int shards, int shard,
                          const int* targets, int rows, int columns, int ld, int first, double* loss_sum);

}  // namespace trident
