#include "kernels/attention.hpp"

#include <cmath>

#include "kernels/causal_softmax.hpp"
#include "kernels/gemm.hpp"

namespace trident {

namespace {

// Where one (b, h) pair's matrices start; rows of q, k, v are 3C apart, rows of out C apart.
struct Head {
  long qkv, out, probs;
  Head(int b, int h, int T, int C, int H)
      : qkv(static_cast<long>(b) * T * 3 * C + static_cast<long>(h) * (C / H)),
        out(static_cast<long>(b) * T * C + static_cast<long>(h) * (C / H)),
        probs((static_cast<long>(b) * H + h) * T * T) {}
};

}  // namespace

void attention_forward(float* out, float* probs, const float* qkv, int B, int T, int C, int H) {
  const int hd = C / H, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const Head at(b, h, T, C, H);
      const float* q = qkv + at.qkv;
      gemm(false, true, T, T, hd, scale, q, ld, q + C, ld, 0.0f, probs + at.probs, T);  // S = scale·Q·Kᵀ
    }
  causal_softmax_forward(probs, B * H, T);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const Head at(b, h, T, C, H);
      const float* v = qkv + at.qkv + 2 * C;
      gemm(false, false, T, hd, T, 1.0f, probs + at.probs, T, v, ld, 0.0f, out + at.out, C);  // O = P·V
    }
}

void attention_backward(float* dqkv, float* dprobs, const float* dout, const float* qkv, const float* probs,
                        int B, int T, int C, int H) {
  const int hd = C / H, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const Head at(b, h, T, C, H);
      const float* v = qkv + at.qkv + 2 * C;
      const float* d_o = dout + at.out;
      gemm(false, true, T, T, hd, 1.0f, d_o, C, v, ld, 0.0f, dprobs + at.probs, T);              // dP = dO·Vᵀ
      gemm(true, false, T, hd, T, 1.0f, probs + at.probs, T, d_o, C, 0.0f, dqkv + at.qkv + 2 * C, ld);  // dV = Pᵀ·dO
    }
  causal_softmax_backward(dprobs, probs, B * H, T);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const Head at(b, h, T, C, H);
      const float* q = qkv + at.qkv;
      const float* ds = dprobs + at.probs;
      gemm(false, false, T, hd, T, scale, ds, T, q + C, ld, 0.0f, dqkv + at.qkv, ld);      // dQ = scale·dS·K
      gemm(true, false, T, hd, T, scale, ds, T, q, ld, 0.0f, dqkv + at.qkv + C, ld);       // dK = scale·dSᵀ·Q
    }
}

}  // namespace trident
