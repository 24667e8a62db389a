#include "kernels/swiglu.hpp"

#include "kernels/math.hpp"
#include "kernels/matmul_precision.hpp"
#include "kernels/row_teams.hpp"

namespace trident {

namespace {

KOKKOS_INLINE_FUNCTION float sigmoid(float x) { return 1.0f / (1.0f + math::fast_exp(-x)); }

}  // namespace

// Row by row (no index division per element; the CPU's loops over a row's columns vectorise).
void swiglu_forward(ProductInput h, const float* gate_up, int rows, int F) {
  const double n = static_cast<double>(rows) * F;
  declare_kernel_cost(KernelCost::of_floats(2.0 * n, h.bf16 ? 0.5 * n : n, 5.0 * n));
  for_each_row("swiglu_forward", rows, KOKKOS_LAMBDA(const RowTeam& team, int r) {
    const float* gate = gate_up + 2L * F * r;
    const float* up = gate + F;
    const long row = static_cast<long>(F) * r;
    row_for(team, 0, F, [&](int c) { store(h, row + c, gate[c] * sigmoid(gate[c]) * up[c]); });
  });
}

void swiglu_backward(ProductInput d_gate_up, const float* dh, long dh_ld, const float* gate_up, int rows, int F) {
  const double n = static_cast<double>(rows) * F;
  declare_kernel_cost(KernelCost::of_floats(3.0 * n, d_gate_up.bf16 ? n : 2.0 * n, 12.0 * n));
  for_each_row("swiglu_backward", rows, KOKKOS_LAMBDA(const RowTeam& team, int r) {
    const float* gate = gate_up + 2L * F * r;
    const float* up = gate + F;
    const float* dh_row = dh + dh_ld * r;
    const long dgate = 2L * F * r, dup = dgate + F;
    row_for(team, 0, F, [&](int c) {
      const float g = gate[c], s = sigmoid(g), d = dh_row[c];
      store(d_gate_up, dgate + c, d * up[c] * s * (1.0f + g * (1.0f - s)));
      store(d_gate_up, dup + c, d * g * s);
    });
  });
}

}  // namespace trident
