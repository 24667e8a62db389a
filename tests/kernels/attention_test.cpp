#include "kernels/attention.hpp"

#include <gtest/gtest.h>

#include "gradient_check.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int B = 2, T = 5, C = 12, H = 3, hd = C / H;

struct AttentionCase {
  GemmContext gemm;
  FloatBuffer qkv = random_buffer(B * T * 3 * C, 1);
  FloatBuffer out{"out", B * T * C}, probs{"probs", B * H * T * T};
  void forward() { attention_forward(gemm, out.data(), probs.data(), qkv.data(), B, T, C, H); }
};

TEST(Attention, ForwardMatchesCausalReference) {
  AttentionCase a;
  a.forward();
  const auto qkv = to_host(a.qkv), out = to_host(a.out), probs = to_host(a.probs);
  auto at = [&](int b, int t, int block, int h, int d) { return double(qkv[(b * T + t) * 3 * C + block * C + h * hd + d]); };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        // Only keys 0..t take part; scores scaled by 1/√hd.
        std::vector<double> p(t + 1);
        double max = -1e300, sum = 0.0;
        for (int j = 0; j <= t; ++j) {
          for (int d = 0; d < hd; ++d) p[j] += at(b, t, 0, h, d) * at(b, j, 1, h, d);
          p[j] /= std::sqrt(double(hd));
          max = std::max(max, p[j]);
        }
        for (double& v : p) sum += (v = std::exp(v - max));
        for (int j = 0; j < T; ++j)
          EXPECT_NEAR(probs[((b * H + h) * T + t) * T + j], j <= t ? p[j] / sum : 0.0, 1e-6);
        for (int d = 0; d < hd; ++d) {
          double o = 0.0;
          for (int j = 0; j <= t; ++j) o += p[j] / sum * at(b, j, 2, h, d);
          EXPECT_NEAR(out[(b * T + t) * C + h * hd + d], o, 1e-5);
        }
      }
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  AttentionCase a;
  const FloatBuffer proj = random_buffer(B * T * C, 2);
  auto objective = [&] {
    a.forward();
    return dot(proj, a.out);
  };
  a.forward();
  // dqkv is overwritten, dprobs is scratch: fill both with garbage first.
  const FloatBuffer dqkv = random_buffer(B * T * 3 * C, 3), dprobs = random_buffer(B * H * T * T, 4);
  attention_backward(a.gemm, dqkv.data(), dprobs.data(), proj.data(), a.qkv.data(), a.probs.data(), B, T, C, H);
  expect_gradient("qkv", a.qkv, to_host(dqkv), objective, 1e-2f);
}

// Grouped-query attention: 4 query heads share 2 kv heads (query head h reads kv head h / 2), q and
// k/v in separate buffers with padded rows.
constexpr int kHeads = 4, kKvHeads = 2, kHeadDim = 4;
constexpr long q_ld = kHeads * kHeadDim + 1, kv_ld = kKvHeads * kHeadDim + 3, out_ld = kHeads * kHeadDim + 2;

struct GqaCase {
  GemmContext gemm;
  FloatBuffer q = random_buffer(B * T * q_ld, 11), k = random_buffer(B * T * kv_ld, 12),
              v = random_buffer(B * T * kv_ld, 13);
  FloatBuffer out{"out", B*T*out_ld}, probs{"probs", B*kHeads*T*T};
  AttentionShape shape{B, T, kHeads, kKvHeads, kHeadDim, q_ld, kv_ld, out_ld};
  void forward() { attention_forward(gemm, out.data(), probs.data(), q.data(), k.data(), v.data(), shape); }
};

TEST(Attention, GroupedQueryHeadsReadTheirSharedKeyValueHead) {
  GqaCase a;
  a.forward();
  const auto q = to_host(a.q), k = to_host(a.k), v = to_host(a.v), out = to_host(a.out);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < kHeads; ++h) {
      const int j = h / (kHeads / kKvHeads);
      for (int t = 0; t < T; ++t) {
        std::vector<double> p(t + 1);
        double max = -1e300, sum = 0.0;
        for (int s = 0; s <= t; ++s) {
          for (int d = 0; d < kHeadDim; ++d)
            p[s] += double(q[(b * T + t) * q_ld + h * kHeadDim + d]) * k[(b * T + s) * kv_ld + j * kHeadDim + d];
          p[s] /= std::sqrt(double(kHeadDim));
          max = std::max(max, p[s]);
        }
        for (double& x : p) sum += (x = std::exp(x - max));
        for (int d = 0; d < kHeadDim; ++d) {
          double o = 0.0;
          for (int s = 0; s <= t; ++s) o += p[s] / sum * v[(b * T + s) * kv_ld + j * kHeadDim + d];
          EXPECT_NEAR(out[(b * T + t) * out_ld + h * kHeadDim + d], o, 1e-5) << "b " << b << " h " << h << " t " << t;
        }
      }
    }
}

TEST(Attention, GroupedQueryBackwardMatchesFiniteDifferences) {
  GqaCase a;
  const FloatBuffer proj = random_buffer(B * T * out_ld, 14);
  auto objective = [&] {
    a.forward();
    return dot(proj, a.out);
  };
  a.forward();
  // Overwritten outputs and scratch: filled with garbage first.
  const FloatBuffer dq = random_buffer(B * T * q_ld, 15), dk = random_buffer(B * T * kv_ld, 16),
                    dv = random_buffer(B * T * kv_ld, 17), dprobs = random_buffer(B * kHeads * T * T, 18);
  attention_backward(a.gemm, dq.data(), dk.data(), dv.data(), dprobs.data(), proj.data(), a.q.data(), a.k.data(),
                     a.v.data(), a.probs.data(), a.shape);
  // Padding columns carry no gradient: zero them in the analytic result as the objective ignores them.
  auto real_columns = [](std::vector<float> grad, long ld, int width) {
    for (std::size_t i = 0; i < grad.size(); ++i)
      if (static_cast<long>(i % ld) >= width) grad[i] = 0.0f;
    return grad;
  };
  expect_gradient("q", a.q, real_columns(to_host(dq), q_ld, kHeads * kHeadDim), objective, 1e-2f);
  expect_gradient("k", a.k, real_columns(to_host(dk), kv_ld, kKvHeads * kHeadDim), objective, 1e-2f);
  expect_gradient("v", a.v, real_columns(to_host(dv), kv_ld, kKvHeads * kHeadDim), objective, 1e-2f);
}

}  // namespace
}  // namespace trident
