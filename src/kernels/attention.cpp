#include "kernels/attention.hpp"

#include <cmath>

#include "kernels/causal_softmax.hpp"
#include "kernels/gemm.hpp"

namespace trident {

namespace {

// Where sequence b's matrices start (head 0), and the distances between its heads: rows of q, k, v
// are 3C apart and rows of out C apart, with head h hd columns further; each head has its own T × T
// probabilities. The H heads of a sequence are therefore one strided batch of products.
struct Sequence {
  long qkv, out, probs;
  long head_columns, head_probs;
  Sequence(int b, int T, int C, int H)
      : qkv(static_cast<long>(b) * T * 3 * C),
        out(static_cast<long>(b) * T * C),
        probs(static_cast<long>(b) * H * T * T),
        head_columns(C / H),
        head_probs(static_cast<long>(T) * T) {}
};

}  // namespace

void attention_forward(GemmContext& context, float* out, float* probs, const float* qkv, int B, int T, int C, int H) {
  const int hd = C / H, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int b = 0; b < B; ++b) {
    const Sequence at(b, T, C, H);
    const float* q = qkv + at.qkv;
    gemm_strided_batched(context, false, true, T, T, hd, scale, q, ld, at.head_columns, q + C, ld, at.head_columns,
                         0.0f, probs + at.probs, T, at.head_probs, H);  // S = scale·Q·Kᵀ
  }
  causal_softmax_forward(probs, B * H, T);
  for (int b = 0; b < B; ++b) {
    const Sequence at(b, T, C, H);
    const float* v = qkv + at.qkv + 2 * C;
    gemm_strided_batched(context, false, false, T, hd, T, 1.0f, probs + at.probs, T, at.head_probs, v, ld,
                         at.head_columns, 0.0f, out + at.out, C, at.head_columns, H);  // O = P·V
  }
}

void attention_backward(GemmContext& context, float* dqkv, float* dprobs, const float* dout, const float* qkv,
                        const float* probs, int B, int T, int C, int H) {
  const int hd = C / H, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int b = 0; b < B; ++b) {
    const Sequence at(b, T, C, H);
    const float* v = qkv + at.qkv + 2 * C;
    const float* d_o = dout + at.out;
    gemm_strided_batched(context, false, true, T, T, hd, 1.0f, d_o, C, at.head_columns, v, ld, at.head_columns, 0.0f,
                         dprobs + at.probs, T, at.head_probs, H);  // dP = dO·Vᵀ
    gemm_strided_batched(context, true, false, T, hd, T, 1.0f, probs + at.probs, T, at.head_probs, d_o, C,
                         at.head_columns, 0.0f, dqkv + at.qkv + 2 * C, ld, at.head_columns, H);  // dV = Pᵀ·dO
  }
  causal_softmax_backward(dprobs, probs, B * H, T);
  for (int b = 0; b < B; ++b) {
    const Sequence at(b, T, C, H);
    const float* q = qkv + at.qkv;
    const float* ds = dprobs + at.probs;
    gemm_strided_batched(context, false, false, T, hd, T, scale, ds, T, at.head_probs, q + C, ld, at.head_columns, 0.0f,
                         dqkv + at.qkv, ld, at.head_columns, H);  // dQ = scale·dS·K
    gemm_strided_batched(context, true, false, T, hd, T, scale, ds, T, at.head_probs, q, ld, at.head_columns, 0.0f,
                         dqkv + at.qkv + C, ld, at.head_columns, H);  // dK = scale·dSᵀ·Q
  }
}

}  // namespace trident
