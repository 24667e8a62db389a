#include "kernels/encoder.hpp"

#include <gtest/gtest.h>

#include "gradient_check.hpp"
#include "kernels/column_sums.hpp"

namespace trident {
namespace {

using namespace testing;

// C spans a full column block and a partial one; tokens repeat within and across sequences.
constexpr int B = 2, T = 4, C = kColumnBlock + 14, V = 7;
const std::vector<int> kTokens = {1, 3, 1, 6, 3, 3, 0, 1};

TEST(Encoder, ForwardAddsTokenAndPositionRows) {
  const FloatBuffer wte = random_buffer(V * C, 1), wpe = random_buffer(T * C, 2), out("out", B * T * C);
  encoder_forward(out.data(), int_buffer(kTokens).data(), wte.data(), 0, V, wpe.data(), B, T, C);
  const auto hte = to_host(wte), hpe = to_host(wpe), hout = to_host(out);
  for (int bt = 0; bt < B * T; ++bt)
    for (int c = 0; c < C; ++c)
      EXPECT_EQ(hout[bt * C + c], hte[kTokens[bt] * C + c] + hpe[(bt % T) * C + c]);
}

// Vocab-parallel: ranks holding rows [0, 3), [3, 6) and [6, 7) (the last padded to 3 rows), one of
// them adding the positions, sum to the full embedding; each rank's backward touches only its rows.
TEST(Encoder, VocabShardsSumToTheFullEmbeddingAndGetOnlyTheirRowsGradients) {
  constexpr int shard_rows = 3, shards = 3;
  const FloatBuffer wte = random_buffer(shards * shard_rows * C, 1), wpe = random_buffer(T * C, 2);
  const FloatBuffer full("full", B * T * C), part("part", B * T * C);
  const IntBuffer tokens = int_buffer(kTokens);
  encoder_forward(full.data(), tokens.data(), wte.data(), 0, V, wpe.data(), B, T, C);
  std::vector<float> sum(B * T * C, 0.0f);
  const FloatBuffer dout = random_buffer(B * T * C, 3), dwte("dwte", shards * shard_rows * C);
  std::vector<FloatBuffer> dwpe;
  for (int s = 0; s < shards; ++s) {
    const float* rows = wte.data() + s * shard_rows * C;
    encoder_forward(part.data(), tokens.data(), rows, s * shard_rows, shard_rows, s == 1 ? wpe.data() : nullptr, B, T, C);
    const auto h = to_host(part);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += h[i];
    dwpe.push_back(FloatBuffer("dwpe", T * C));
    encoder_backward(dwte.data() + s * shard_rows * C, dwpe[s].data(), dout.data(), tokens.data(), s * shard_rows,
                     shard_rows, B, T, C);
  }
  EXPECT_EQ(sum, to_host(full));  // exact: each element is one token row, one position row and zeros

  const FloatBuffer dwte_full("dwte_full", V * C), dwpe_full("dwpe_full", T * C);
  encoder_backward(dwte_full.data(), dwpe_full.data(), dout.data(), tokens.data(), 0, V, B, T, C);
  const auto sharded = to_host(dwte), whole = to_host(dwte_full);
  EXPECT_EQ(std::vector<float>(sharded.begin(), sharded.begin() + V * C), whole);
  for (std::size_t i = V * C; i < sharded.size(); ++i) ASSERT_EQ(sharded[i], 0.0f) << "padding row element " << i;
  for (const FloatBuffer& shard_dwpe : dwpe) EXPECT_EQ(to_host(shard_dwpe), to_host(dwpe_full));  // every rank's
}

TEST(Encoder, BackwardAccumulatesFiniteDifferenceGradients) {
  const FloatBuffer wte = random_buffer(V * C, 1), wpe = random_buffer(T * C, 2), out("out", B * T * C);
  const FloatBuffer proj = random_buffer(B * T * C, 3);
  const IntBuffer tokens = int_buffer(kTokens);
  auto objective = [&] {
    encoder_forward(out.data(), tokens.data(), wte.data(), 0, V, wpe.data(), B, T, C);
    return dot(proj, out);
  };
  // Start from non-zero gradients: backward must add to them.
  const FloatBuffer dwte = random_buffer(V * C, 4), dwpe = random_buffer(T * C, 5);
  const auto dwte_before = to_host(dwte), dwpe_before = to_host(dwpe);
  encoder_backward(dwte.data(), dwpe.data(), proj.data(), tokens.data(), 0, V, B, T, C);
  expect_gradient("wte", wte, difference(to_host(dwte), dwte_before), objective, 1e-2f);
  expect_gradient("wpe", wpe, difference(to_host(dwpe), dwpe_before), objective, 1e-2f);
}

}  // namespace
}  // namespace trident
