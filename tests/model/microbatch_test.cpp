#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model_test_support.hpp"

namespace trident {
namespace {

using namespace testing;

IntBuffer sequences(const IntBuffer& tokens, int first, int count, int T) {
  return Kokkos::subview(tokens, std::make_pair(first * T, (first + count) * T));
}

// Two micro-batches of 2 sequences, both in flight before either backward, with loss_scale 1/N,
// accumulate the gradients of one micro-batch of all 4 sequences.
TEST(MicroBatches, AccumulatedGradientsEqualOneLargerBatch) {
  const ModelConfig cfg = tiny_config();
  const int T = cfg.seq_len, N = 4 * T;
  const float scale = 1.0f / N;
  const IntBuffer inputs = random_tokens(N, cfg.vocab, 1), targets = random_tokens(N, cfg.vocab, 2);

  Transformer whole(cfg, 4, 9, no_tp());
  whole.zero_grads();
  const double whole_loss = whole.forward(0, inputs, targets);
  whole.backward(0, scale);

  Transformer halves(cfg, 2, 9, no_tp());
  halves.zero_grads();
  double halves_loss = halves.forward(0, sequences(inputs, 0, 2, T), sequences(targets, 0, 2, T));
  halves_loss += halves.forward(1, sequences(inputs, 2, 2, T), sequences(targets, 2, 2, T));
  halves.backward(1, scale);
  halves.backward(0, scale);

  EXPECT_NEAR(halves_loss, whole_loss, 1e-5 * whole_loss);
  const std::vector<float> a = to_host(whole.params().grads), b = to_host(halves.params().grads);
  float largest = 0.0f;
  for (float g : a) largest = std::max(largest, std::abs(g));
  ASSERT_GT(largest, 1e-3f);
  for (const ParamTensor& tensor : whole.params().tensors())
    for (std::size_t i = tensor.offset; i < tensor.offset + tensor.size; ++i)
      ASSERT_NEAR(b[i], a[i], 1e-5f * largest + 1e-4f * std::abs(a[i])) << tensor.name << "[" << i - tensor.offset << "]";
}

}  // namespace
}  // namespace trident
