#include "kernels/causal_softmax.hpp"

#include "kernels/math.hpp"
#include "kernels/row_teams.hpp"

namespace trident {

void causal_softmax_forward(float* scores, int blocks, int T) {
  const double elements = static_cast<double>(blocks) * T * T;
  declare_kernel_cost(KernelCost::of_floats(elements, elements, 2.0 * elements));  // half of them masked
  for_each_row("causal_softmax_forward", blocks * T, KOKKOS_LAMBDA(const RowTeam& team, int r) {
    const int visible = r % T + 1;  // position t attends to 0..t
    float* row = scores + static_cast<long>(r) * T;
    const float largest = row_max(team, visible, [&](int j) { return row[j]; });
    const float sum = row_sum(team, visible, [&](int j) { return row[j] = math::fast_exp(row[j] - largest); });
    const float inverse = 1.0f / sum;
    row_for(team, 0, visible, [&](int j) { row[j] *= inverse; });
    row_for(team, visible, T, [&](int j) { row[j] = 0.0f; });
  });
}

void causal_softmax_backward(float* d, const float* probs, int blocks, int T) {
  const double elements = static_cast<double>(blocks) * T * T;
  declare_kernel_cost(KernelCost::of_floats(2.0 * elements, elements, 2.0 * elements));
  for_each_row("causal_softmax_backward", blocks * T, KOKKOS_LAMBDA(const RowTeam& team, int r) {
    const int visible = r % T + 1;
    float* d_row = d + static_cast<long>(r) * T;
    const float* p_row = probs + static_cast<long>(r) * T;
    const float dot = row_sum(team, visible, [&](int j) { return p_row[j] * d_row[j]; });
    row_for(team, 0, visible, [&](int j) { d_row[j] = p_row[j] * (d_row[j] - dot); });
    row_for(team, visible, T, [&](int j) { d_row[j] = 0.0f; });
  });
}

}  // namespace trident
