// What a norm (LayerNorm, RMSNorm) reads: a tensor x, or the residual connection's sum a + b, which
// the norm's kernel adds and writes out (the residual stream) in its first pass over each row, so
// that the add costs no launch and no pass of its own.
#pragma once

#include "kernels/row_teams.hpp"

namespace trident {

struct NormInput {
  const float* x = nullptr;      // the input, or a of a + b
  const float* added = nullptr;  // b; null: x alone
  float* sum = nullptr;          // where a + b is written (may be a itself)

  NormInput(const float* input) : x(input) {}  // NOLINT: a plain tensor is a norm's usual input
  static NormInput residual(float* sum, const float* a, const float* b) {
    NormInput in(a);
    in.added = b;
    in.sum = sum;
    return in;
  }

  // The row's input values, once first_pass() has run for it.
  KOKKOS_INLINE_FUNCTION const float* row(long offset) const { return (added ? sum : x) + offset; }

  // Σ_c f(value of column c) over the row at `offset`, writing a + b where there is a b. Like
  // row_sum, it returns on every thread of the team after all have written: row() may then be read.
  template <class F>
  KOKKOS_INLINE_FUNCTION float first_pass(const RowTeam& team, long offset, int C, const F& f) const {
    if (!added) {
      const float* in = x + offset;
      return row_sum(team, C, [&](int c) { return f(in[c]); });
    }
    const float *a = x + offset, *b = added + offset;
    float* s = sum + offset;
    return row_sum(team, C, [&](int c) {
      const float value = a[c] + b[c];
      s[c] = value;
      return f(value);
    });
  }
};

// A norm's cost over rows × C (kernels/profile.hpp): forward reads x (a and b, and writes a + b, for
// a residual sum), writes its output (2 bytes an element where it is stored in bf16), reads
// `vectors` C-vectors (LayerNorm's γ and β, RMSNorm's γ) and writes as many statistics per row
// (mean and 1/σ; 1/rms). Backward reads dout, x and dx (added to), writes dx, reads the statistics
// and γ, and adds into the vectors' gradients.
inline KernelCost norm_forward_cost(const NormInput& x, int rows, int C, int vectors, double flops_per_element,
                                    bool bf16_output) {
  const double n = static_cast<double>(rows) * C, passes = x.added ? 2.0 : 1.0;
  return KernelCost::of_floats(passes * n + vectors * C, (passes - (bf16_output ? 0.5 : 0.0)) * n + vectors * rows,
                               flops_per_element * n + (passes - 1.0) * n);
}
inline KernelCost norm_backward_cost(int rows, int C, int vectors, double flops_per_element) {
  const double n = static_cast<double>(rows) * C;
  return KernelCost::of_floats(3.0 * n + vectors * rows + (vectors + 1.0) * C, n + vectors * C, flops_per_element * n);
}

}  // namespace trident
