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

}  // namespace
}  // namespace trident
