// SwiGLU, the gate of Llama's MLP: h = silu(gate) · up, elementwise, silu(g) = g · sigmoid(g). gate
// and up are the halves of one product's output (gate_proj and up_proj multiplied as one [2F, C]
// weight): each of `rows` rows holds F gate values, then F up values.
#pragma once

#include <cstdint>

#include "kernels/gemm.hpp"

namespace trident {

// h[r, c] = silu(gate_up[r, c]) · gate_up[r, F + c]   (h: rows × F, in fp32 or bf16 as it is stored)
void swiglu_forward(ProductInput h, const float* gate_up, int rows, int F);

// The gradients w.r.t. gate and up, in the same layout: d_gate_up[r, c] = dh · up · silu'(gate),
// d_gate_up[r, F + c] = dh · silu(gate), in fp32 or bf16 as it is stored (only products read it).
// dh[r, c] sits at dh[r · dh_ld + c]; in fp32 it may be the gate half of d_gate_up itself (dh_ld =
// 2F), read before it is overwritten.
void swiglu_backward(ProductInput d_gate_up, const float* dh, long dh_ld, const float* gate_up, int rows, int F);

// A [rows, 2F] float buffer in which swiglu_backward reads dh (the down projection's input gradient)
// and leaves d(gate | up), which only products read. fp32: dh in each row's gate half (rows 2F
// apart), overwritten in place. bf16 (train.precision = "bf16"): d(gate | up) stored as bf16 in the
// buffer's first half and dh in its second half ([rows, F]), so that the kernel never writes where
// it reads.
struct SwigluGrads {
  float* dh;
  long dh_ld;
  ProductInput d_gate_up;
  SwigluGrads(float* buffer, long rows, int F, bool bf16)
      : dh(bf16 ? buffer + rows * F : buffer),
        dh_ld(bf16 ? F : 2L * F),
        d_gate_up(bf16 ? ProductInput::of_bf16(reinterpret_cast<std::uint16_t*>(buffer)) : ProductInput(buffer)) {}
  // Row `first` of dh, and of d(gate | up) (whose rows are 2F elements apart).
  float* dh_row(long first) const { return dh + dh_ld * first; }
  ProductInput d_gate_up_row(long first, int F) const {
    const long offset = 2L * F * first;
    return d_gate_up.bf16 ? ProductInput::of_bf16(d_gate_up.bf16 + offset) : ProductInput(d_gate_up.fp32 + offset);
  }
};

}  // namespace trident
