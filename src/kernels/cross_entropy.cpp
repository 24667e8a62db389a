#include "kernels/cross_entropy.hpp"

#include <cfloat>

#include "kernels/device.hpp"
#include "kernels/math.hpp"

namespace trident {

namespace {

struct RowSoftmax {
  float max, exp_sum;
};

// Replaces row[0, n) by exp(row − max(row)); returns that max and the sum of the exponentials.
KOKKOS_INLINE_FUNCTION RowSoftmax exponentiate(float* row, int n) {
  float largest = -FLT_MAX;
#pragma omp simd reduction(max : largest)
  for (int v = 0; v < n; ++v) largest = row[v] > largest ? row[v] : largest;
  float exp_sum = 0.0f;
#pragma omp simd reduction(+ : exp_sum)
  for (int v = 0; v < n; ++v) {
    row[v] = math::fast_exp(row[v] - largest);
    exp_sum += row[v];
  }
  return {largest, exp_sum};
}

KOKKOS_INLINE_FUNCTION void scale(float* row, int n, float factor) {
#pragma omp simd
  for (int v = 0; v < n; ++v) row[v] *= factor;
}

}  // namespace

double softmax_cross_entropy(float* logits, float* losses, const int* targets, int rows, int V) {
  // Each row is finished while it is still in cache, which the two-pass shard version cannot do.
  double loss_sum = 0.0;
  Kokkos::parallel_reduce(
      "softmax_cross_entropy", Kokkos::RangePolicy<ExecSpace>(0, rows),
      KOKKOS_LAMBDA(int r, double& sum) {
        float* row = logits + static_cast<long>(r) * V;
        const float target_logit = row[targets[r]];
        const RowSoftmax softmax = exponentiate(row, V);
        scale(row, V, 1.0f / softmax.exp_sum);
        row[targets[r]] -= 1.0f;
        losses[r] = math::log(softmax.exp_sum) - (target_logit - softmax.max);
        sum += losses[r];
      },
      loss_sum);
  return loss_sum;
}

void softmax_shard_statistics(float* logits, float* stats, const int* targets, int rows, int columns, int ld,
                              int first) {
  Kokkos::parallel_for("softmax_shard_statistics", Kokkos::RangePolicy<ExecSpace>(0, rows), KOKKOS_LAMBDA(int r) {
    float* row = logits + static_cast<long>(r) * ld;
    const int target = targets[r] - first;
    stats[2 * rows + r] = target >= 0 && target < columns ? row[target] : 0.0f;
    const RowSoftmax softmax = exponentiate(row, columns);
    stats[r] = softmax.max;
    stats[rows + r] = softmax.exp_sum;
  });
}

double softmax_shard_finish(float* logits, float* losses, const float* all_stats, int shards, int shard,
                            const int* targets, int rows, int columns, int ld, int first) {
  double loss_sum = 0.0;
  Kokkos::parallel_reduce(
      "softmax_shard_finish", Kokkos::RangePolicy<ExecSpace>(0, rows),
      KOKKOS_LAMBDA(int r, double& sum) {
        auto shard_max = [&](int s) { return all_stats[3L * s * rows + r]; };
        auto shard_exp_sum = [&](int s) { return all_stats[3L * s * rows + rows + r]; };
        float max = -FLT_MAX, exp_sum = 0.0f, target_logit = 0.0f;
        for (int s = 0; s < shards; ++s) max = shard_max(s) > max ? shard_max(s) : max;
        for (int s = 0; s < shards; ++s) {
          exp_sum += shard_exp_sum(s) * math::fast_exp(shard_max(s) - max);
          target_logit += all_stats[3L * s * rows + 2 * rows + r];  // only the target's shard adds a non-zero
        }
        float* row = logits + static_cast<long>(r) * ld;
        scale(row, columns, math::fast_exp(shard_max(shard) - max) / exp_sum);
        const int target = targets[r] - first;
        if (target >= 0 && target < columns) row[target] -= 1.0f;
        losses[r] = math::log(exp_sum) - (target_logit - max);
        sum += losses[r];
      },
      loss_sum);
  return loss_sum;
}

}  // namespace trident
