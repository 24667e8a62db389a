#include "kernels/cross_entropy.hpp"

#include <cfloat>

#include "kernels/fused_rows.hpp"
#include "kernels/math.hpp"
#include "kernels/row_teams.hpp"

namespace trident {

namespace {

struct RowSoftmax {
  float max, exp_sum;
};

// Replaces row[0, n) by exp(row − max(row)); returns that max and the sum of the exponentials.
// Every thread of the team must have read what it needs of the row's logits before the call: the
// first reduction inside orders those reads before the writes.
KOKKOS_INLINE_FUNCTION RowSoftmax exponentiate(const RowTeam& team, float* row, int n) {
  const float largest = row_max(team, n, [&](int v) { return row[v]; });
  const float exp_sum = row_sum(team, n, [&](int v) { return row[v] = math::fast_exp(row[v] - largest); });
  return {largest, exp_sum};
}

// row[v] ← row[v] · factor − [v = target]: the softmax's gradient, d loss / d logits.
KOKKOS_INLINE_FUNCTION void scale_minus_onehot(const RowTeam& team, float* row, int n, float factor, int target) {
  row_for(team, 0, n, [&](int v) { row[v] = row[v] * factor - (v == target ? 1.0f : 0.0f); });
}

}  // namespace

void softmax_cross_entropy(float* logits, float* losses, const int* targets, int rows, int V, double* loss_sum) {
  // Three passes over each row (its maximum; the exponentials written; the gradient written).
  const double elements = static_cast<double>(rows) * V;
  declare_kernel_cost(KernelCost::of_floats(3.0 * elements + rows, 2.0 * elements + rows, 5.0 * elements));
  if (fused_rows::cross_entropy(logits, losses, targets, rows, V, loss_sum)) return;
  // Each row is finished while it is still in cache, which the two-pass shard version cannot do.
  sum_over_rows_into(
      "softmax_cross_entropy", rows,
      KOKKOS_LAMBDA(const RowTeam& team, int r) {
        float* row = logits + static_cast<long>(r) * V;
        const int target = targets[r];
        const bool known = target >= 0 && target < V;
        const float target_logit = known ? row[target] : math::bit_cast<float>(0x7fc00000u);  // quiet NaN
        const RowSoftmax softmax = exponentiate(team, row, V);
        scale_minus_onehot(team, row, V, 1.0f / softmax.exp_sum, target);
        const float loss = math::log(softmax.exp_sum) - (target_logit - softmax.max);
        once_per_row(team, [&] { losses[r] = loss; });
        return static_cast<double>(loss);
      },
      loss_sum);
}

void softmax_shard_statistics(float* logits, float* stats, const int* targets, int rows, int columns, int ld,
                              int first) {
  const double elements = static_cast<double>(rows) * columns;
  declare_kernel_cost(KernelCost::of_floats(2.0 * elements + rows, elements + 3.0 * rows, 3.0 * elements));
  for_each_row("softmax_shard_statistics", rows, KOKKOS_LAMBDA(const RowTeam& team, int r) {
    float* row = logits + static_cast<long>(r) * ld;
    const int target = targets[r] - first;
    const float target_logit = target >= 0 && target < columns ? row[target] : 0.0f;
    const RowSoftmax softmax = exponentiate(team, row, columns);
    once_per_row(team, [&] {
      stats[r] = softmax.max;
      stats[rows + r] = softmax.exp_sum;
      stats[2 * rows + r] = target_logit;
    });
  });
}

void softmax_shard_finish(float* logits, float* losses, const float* all_stats, int shards, int shard,
                          const int* targets, int rows, int columns, int ld, int first, double* loss_sum) {
  const double elements = static_cast<double>(rows) * columns;
  declare_kernel_cost(KernelCost::of_floats(elements + 3.0 * shards * rows + rows, elements + rows, 2.0 * elements));
  sum_over_rows_into("softmax_shard_finish", rows, KOKKOS_LAMBDA(const RowTeam& team, int r) {
    // A few shards: every thread of the team combines them itself.
    auto shard_max = [&](int s) { return all_stats[3L * s * rows + r]; };
    auto shard_exp_sum = [&](int s) { return all_stats[3L * s * rows + rows + r]; };
    float max = -FLT_MAX, exp_sum = 0.0f, target_logit = 0.0f;
    for (int s = 0; s < shards; ++s) max = shard_max(s) > max ? shard_max(s) : max;
    for (int s = 0; s < shards; ++s) {
      exp_sum += shard_exp_sum(s) * math::fast_exp(shard_max(s) - max);
      target_logit += all_stats[3L * s * rows + 2 * rows + r];  // only the target's shard adds a non-zero
    }
    float* row = logits + static_cast<long>(r) * ld;
    scale_minus_onehot(team, row, columns, math::fast_exp(shard_max(shard) - max) / exp_sum, targets[r] - first);
    const float loss = math::log(exp_sum) - (target_logit - max);
    once_per_row(team, [&] { losses[r] = loss; });
    return static_cast<double>(loss);
  }, loss_sum);
}

}  // namespace trident
