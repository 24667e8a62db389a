#include "kernels/causal_softmax.hpp"

#include "kernels/math.hpp"
#include "kernels/row_teams.hpp"

namespace trident {

namespace {

// The first column row r of the [blocks, T, T] scores sees: its document's start, or 0.
KOKKOS_INLINE_FUNCTION int first_visible(const std::int32_t* starts, int r, int T, int heads) {
  return starts ? starts[static_cast<long>(r / T / heads) * T + r % T] : 0;
}

}  // namespace

void causal_softmax_forward(float* scores, int blocks, int T, const DocumentMask& documents, int heads) {
  const std::int32_t* starts = documents.starts;
  const double elements = static_cast<double>(blocks) * T * T;
  declare_kernel_cost(KernelCost::of_floats(elements, elements, 2.0 * elements));  // half of them masked
  for_each_row("causal_softmax_forward", blocks * T, KOKKOS_LAMBDA(const RowTeam& team, int r) {
    const int visible = r % T + 1;  // position t attends to 0..t (from its document's start)
    const int first = first_visible(starts, r, T, heads);
    float* row = scores + static_cast<long>(r) * T;
    float* seen = row + first;
    const float largest = row_max(team, visible - first, [&](int j) { return seen[j]; });
    const float sum =
        row_sum(team, visible - first, [&](int j) { return seen[j] = math::fast_exp(seen[j] - largest); });
    const float inverse = 1.0f / sum;
    row_for(team, first, visible, [&](int j) { row[j] *= inverse; });
    row_for(team, 0, first, [&](int j) { row[j] = 0.0f; });
    row_for(team, visible, T, [&](int j) { row[j] = 0.0f; });
  });
}

void causal_softmax_backward(float* d, const float* probs, int blocks, int T, const DocumentMask& documents,
                             int heads) {
  const std::int32_t* starts = documents.starts;
  const double elements = static_cast<double>(blocks) * T * T;
  declare_kernel_cost(KernelCost::of_floats(2.0 * elements, elements, 2.0 * elements));
  for_each_row("causal_softmax_backward", blocks * T, KOKKOS_LAMBDA(const RowTeam& team, int r) {
    const int visible = r % T + 1;
    const int first = first_visible(starts, r, T, heads);
    float* d_row = d + static_cast<long>(r) * T;
    const float* p_row = probs + static_cast<long>(r) * T;
    const float dot = row_sum(team, visible - first, [&](int j) { return p_row[first + j] * d_row[first + j]; });
    row_for(team, first, visible, [&](int j) { d_row[j] = p_row[j] * (d_row[j] - dot); });
    row_for(team, 0, first, [&](int j) { d_row[j] = 0.0f; });
    row_for(team, visible, T, [&](int j) { d_row[j] = 0.0f; });
  });
}

}  // namespace trident
