#include "kernels/cross_entropy.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "gradient_check.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int rows = 6, V = 70;
const std::vector<int> kTargets = {0, 69, 5, 5, 33, 12};

// The kernels leave Σ losses in one device double; read here.
template <class Kernel>
double summed(Kernel&& kernel) {
  Kokkos::View<double, MemSpace> total("total");
  kernel(total.data());
  double host = 0.0;
  Kokkos::deep_copy(host, total);
  return host;
}

double cross_entropy(float* logits, float* losses, const int* targets, int n, int vocab) {
  return summed([&](double* total) { softmax_cross_entropy(logits, losses, targets, n, vocab, total); });
}

TEST(SoftmaxCrossEntropy, LossesMatchReferenceAndSum) {
  const FloatBuffer logits = random_buffer(rows * V, 1, 3.0f), losses("losses", rows);
  const auto x = to_host(logits);
  const double total = cross_entropy(logits.data(), losses.data(), int_buffer(kTargets).data(), rows, V);
  const auto hl = to_host(losses);
  double reference_total = 0.0;
  for (int r = 0; r < rows; ++r) {
    double max = -1e300, sum = 0.0;
    for (int v = 0; v < V; ++v) max = std::max(max, double(x[r * V + v]));
    for (int v = 0; v < V; ++v) sum += std::exp(x[r * V + v] - max);
    const double loss = std::log(sum) + max - x[r * V + kTargets[r]];
    EXPECT_NEAR(hl[r], loss, 1e-5 * loss);
    reference_total += loss;
  }
  EXPECT_NEAR(total, reference_total, 1e-5 * reference_total);
}

TEST(SoftmaxCrossEntropy, LogitsBecomeGradientOfLossSum) {
  const FloatBuffer logits = random_buffer(rows * V, 1, 3.0f), work("work", rows * V), losses("losses", rows);
  const IntBuffer targets = int_buffer(kTargets);
  auto objective = [&] {
    Kokkos::deep_copy(work, logits);
    return cross_entropy(work.data(), losses.data(), targets.data(), rows, V);
  };
  objective();
  expect_gradient("logits", logits, to_host(work), objective, 1e-2f);
}

// The vocabulary split in shards of 24 ids (padded 70 → 96): three shards of 24, 24 and 22 real
// columns and an empty fourth, as a vocab-parallel group of 4 ranks holds it. Every shard's
// statistics, exchanged, give the losses and gradients of the fused kernel over the whole row.
TEST(SoftmaxCrossEntropy, VocabShardsGiveTheWholeRowsLossesAndGradients) {
  constexpr int shards = 4, ld = 24;
  const FloatBuffer logits = random_buffer(rows * V, 1, 3.0f), losses("losses", rows);
  const IntBuffer targets = int_buffer(kTargets);
  const auto x = to_host(logits);
  std::vector<std::vector<float>> shard_logits(shards, std::vector<float>(rows * ld, std::nanf("")));
  for (int r = 0; r < rows; ++r)
    for (int v = 0; v < V; ++v) shard_logits[v / ld][r * ld + v % ld] = x[r * V + v];
  const double fused_total = cross_entropy(logits.data(), losses.data(), targets.data(), rows, V);
  const auto fused_grad = to_host(logits), fused_losses = to_host(losses);

  auto columns_of = [&](int s) { return std::clamp(V - s * ld, 0, ld); };
  std::vector<FloatBuffer> buffers;
  std::vector<float> all_stats;
  for (int s = 0; s < shards; ++s) {
    buffers.push_back(FloatBuffer("shard", rows * ld));
    copy_to(buffers[s], shard_logits[s]);
    const FloatBuffer stats("stats", 3 * rows);
    softmax_shard_statistics(buffers[s].data(), stats.data(), targets.data(), rows, columns_of(s), ld, s * ld);
    const auto h = to_host(stats);
    all_stats.insert(all_stats.end(), h.begin(), h.end());
  }
  FloatBuffer all("all_stats", all_stats.size());
  copy_to(all, all_stats);
  for (int s = 0; s < shards; ++s) {
    const FloatBuffer shard_losses("shard_losses", rows);
    const double total = summed([&](double* sum) {
      softmax_shard_finish(buffers[s].data(), shard_losses.data(), all.data(), shards, s, targets.data(), rows,
                           columns_of(s), ld, s * ld, sum);
    });
    EXPECT_NEAR(total, fused_total, 1e-5 * fused_total) << "shard " << s;
    const auto l = to_host(shard_losses), g = to_host(buffers[s]);
    for (int r = 0; r < rows; ++r) {
      EXPECT_NEAR(l[r], fused_losses[r], 1e-5 * fused_losses[r]) << "shard " << s << " row " << r;
      for (int c = 0; c < ld; ++c) {
        if (c < columns_of(s))
          EXPECT_NEAR(g[r * ld + c], fused_grad[r * V + s * ld + c], 1e-6) << "shard " << s << " row " << r;
        else
          EXPECT_TRUE(std::isnan(g[r * ld + c])) << "padding column written: shard " << s << " row " << r;
      }
    }
  }
}

// The data layer rejects ids outside the vocabulary as it reads them; one that reaches the kernel
// anyway turns its row's loss (and the sum) into NaN rather than reading past the row.
TEST(SoftmaxCrossEntropy, TargetOutsideTheVocabularyGivesNaN) {
  const FloatBuffer logits = random_buffer(rows * V, 1, 3.0f), losses("losses", rows);
  std::vector<int> targets = kTargets;
  targets[2] = V;
  const double total = cross_entropy(logits.data(), losses.data(), int_buffer(targets).data(), rows, V);
  EXPECT_TRUE(std::isnan(total));
  const auto l = to_host(losses);
  EXPECT_TRUE(std::isnan(l[2]));
  EXPECT_TRUE(std::isfinite(l[1]) && std::isfinite(l[3]));
}

}  // namespace
}  // namespace trident
