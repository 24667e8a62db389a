// The GPU's fused attention kernels (gpu/flash_attention_*.cu) against their reference, the Kokkos
// tiled kernel of the CPU build in bf16 (kernels/attention.hpp: products read bf16-rounded inputs
// as the fused kernels' do), on random inputs and outputs poisoned with NaN beforehand: GPT-2's
// multi-head layout, grouped-query heads in Llama's q|k|v rows, head dimensions 16 to 128, lengths
// that end inside a tile. Skipped without a GPU.
#include "gpu/flash_attention.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "compare.hpp"
#include "device_vector.hpp"
#include "gpu_available.hpp"
#include "kernels/attention.hpp"
#include "random_values.hpp"

namespace trident {
namespace {

// One sequence batch with q, k, v in one row per token, q | k | v (GPT-2's c_attn output, Llama's
// fused projection), and the output's gradient.
struct Case {
  AttentionShape shape;
  std::vector<float> qkv, dout;

  Case(int B, int T, int heads, int kv_heads, int head_dim) {
    const long ld = static_cast<long>(heads + 2 * kv_heads) * head_dim;
    shape = {B, T, heads, kv_heads, head_dim, ld, ld, static_cast<long>(heads) * head_dim, AttentionKernel::tiled};
    qkv = random_values(static_cast<std::size_t>(B) * T * ld, 11, 2.0f);  // scores spread: a peaked softmax
    dout = random_values(out_size(), 12, 1.0f);
  }
  std::size_t out_size() const { return static_cast<std::size_t>(shape.B) * shape.T * shape.out_ld; }
  std::size_t rows() const { return static_cast<std::size_t>(shape.B) * shape.heads * shape.T; }
  long k_offset() const { return static_cast<long>(shape.heads) * shape.head_dim; }
  long v_offset() const { return k_offset() + static_cast<long>(shape.kv_heads) * shape.head_dim; }
};

struct Results {
  std::vector<float> out, log_sum_exp, dqkv;
};

Results tiled_reference(const Case& c) {
  GemmContext bf16(MatmulPrecision::bf16);
  Results r{std::vector<float>(c.out_size()), std::vector<float>(c.rows()), std::vector<float>(c.qkv.size(), 0.0f)};
  std::vector<float> scratch(attention_scratch_floats(c.shape));
  const float* qkv = c.qkv.data();
  attention_forward(bf16, r.out.data(), r.log_sum_exp.data(), scratch.data(), qkv, qkv + c.k_offset(),
                    qkv + c.v_offset(), c.shape);
  float* d = r.dqkv.data();
  attention_backward(bf16, d, d + c.k_offset(), d + c.v_offset(), scratch.data(), c.dout.data(), qkv,
                     qkv + c.k_offset(), qkv + c.v_offset(), r.out.data(), r.log_sum_exp.data(), c.shape);
  return r;
}

Results flash(const Case& c) {
  const AttentionShape& s = c.shape;
  const FlashAttentionShape shape{s.B, s.T, s.heads, s.kv_heads, s.head_dim, s.q_ld, s.kv_ld, s.out_ld};
  EXPECT_TRUE(flash_attention_supports(shape));
  DeviceVector<float> qkv(c.qkv), dout(c.dout), out(poisoned(c.out_size())), lse(poisoned(c.rows())),
      dots(poisoned(c.rows())), dqkv(poisoned(c.qkv.size()));
  const float* in = qkv.data;
  flash_attention_forward(out.data, lse.data, in, in + c.k_offset(), in + c.v_offset(), shape, nullptr);
  flash_attention_query_grads(dqkv.data, dots.data, dout.data, in, in + c.k_offset(), in + c.v_offset(), out.data,
                              lse.data, shape, nullptr);
  flash_attention_key_grads(dqkv.data + c.k_offset(), dqkv.data + c.v_offset(), dout.data, in, in + c.k_offset(),
                            in + c.v_offset(), dots.data, lse.data, shape, nullptr);
  TRIDENT_GPU_CHECK(cudaDeviceSynchronize());
  return {out.to_host(), lse.to_host(), dqkv.to_host()};
}

// The log-sum-exp agrees to float rounding of the same bf16 products; outputs and gradients to
// bf16's rounding of the probabilities and their gradients, taken in other tiles (1e-3 to 1e-2 by
// METHOD.md's rule for bf16 operands).
void expect_flash_matches_tiled(const Case& c) {
  const Results want = tiled_reference(c), got = flash(c);
  EXPECT_LT(relative_error(got.log_sum_exp, want.log_sum_exp), 1e-5);
  EXPECT_LT(relative_error(got.out, want.out), 1e-2);
  EXPECT_LT(relative_error(got.dqkv, want.dqkv), 2e-2);
}

TEST(FlashAttention, MatchesTheTiledKernelOnGpt2sMultiHeadLayout) {
  TRIDENT_SKIP_WITHOUT_GPU();
  expect_flash_matches_tiled(Case(2, 200, 4, 4, 64));
}

TEST(FlashAttention, MatchesTheTiledKernelOnGroupedQueryHeads) {
  TRIDENT_SKIP_WITHOUT_GPU();
  expect_flash_matches_tiled(Case(1, 130, 8, 2, 128));
  expect_flash_matches_tiled(Case(2, 96, 6, 3, 32));
}

// Whole tiles only (T a multiple of 64), so that the kernels' tiles off the diagonal run unmasked,
// and four query heads to a key/value head, as Llama 3.2 1B has them.
TEST(FlashAttention, MatchesTheTiledKernelOverWholeTilesOfALlamaGroup) {
  TRIDENT_SKIP_WITHOUT_GPU();
  expect_flash_matches_tiled(Case(1, 320, 4, 1, 64));
}

TEST(FlashAttention, MatchesTheTiledKernelOnShortSequencesAndSmallHeads) {
  TRIDENT_SKIP_WITHOUT_GPU();
  expect_flash_matches_tiled(Case(3, 17, 2, 1, 16));
  expect_flash_matches_tiled(Case(1, 1, 2, 2, 96));
}

TEST(FlashAttention, TakesOnlyTheShapesItsKernelsAreBuiltFor) {
  EXPECT_TRUE(flash_attention_supports({1, 64, 12, 12, 64, 3 * 768, 3 * 768, 768}));
  EXPECT_FALSE(flash_attention_supports({1, 64, 12, 12, 48, 3 * 576, 3 * 576, 576}));  // no kernel for 48
  EXPECT_FALSE(flash_attention_supports({1, 64, 12, 5, 64, 64 * 22, 64 * 22, 768}));   // 12 heads over 5 groups
  EXPECT_FALSE(flash_attention_supports({1, 64, 4, 4, 64, 770, 770, 256}));            // rows not 16-byte apart
}

}  // namespace
}  // namespace trident
