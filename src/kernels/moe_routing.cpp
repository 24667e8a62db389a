#include "kernels/moe_routing.hpp"

#include "kernels/math.hpp"
#include "kernels/matmul_precision.hpp"
#include "kernels/row_teams.hpp"

namespace trident {

namespace {

// One thread per token: a token's routing reads a row of `experts` probabilities (a few dozen).
template <class Body>
void for_each_token(const char* label, int rows, const Body& body) {
  Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace>(0, rows), body);
}

// Work on a whole micro-batch's routing that runs in order (a counting sort): one thread.
template <class Body>
void in_one_thread(const char* label, const Body& body) {
  Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace>(0, 1), KOKKOS_LAMBDA(int) { body(); });
}

KOKKOS_INLINE_FUNCTION bool already_chosen(const int* chosen, int count, int expert) {
  for (int j = 0; j < count; ++j)
    if (chosen[j] == expert) return true;
  return false;
}

}  // namespace

void route_top_k(float* probs, int* chosen, float* weights, int rows, int experts, int k) {
  const double n = static_cast<double>(rows) * experts;
  declare_kernel_cost(KernelCost::of_floats(n, n + 2.0 * rows * k, (4.0 + k) * n));
  for_each_token("route_top_k", rows, KOKKOS_LAMBDA(int t) {
    float* p = probs + static_cast<long>(t) * experts;
    float largest = p[0], sum = 0.0f;
    for (int e = 1; e < experts; ++e) largest = p[e] > largest ? p[e] : largest;
    for (int e = 0; e < experts; ++e) sum += (p[e] = math::fast_exp(p[e] - largest));
    for (int e = 0; e < experts; ++e) p[e] /= sum;
    int* mine = chosen + static_cast<long>(t) * k;
    float* w = weights + static_cast<long>(t) * k;
    float kept = 0.0f;
    for (int j = 0; j < k; ++j) {
      int best = -1;
      for (int e = 0; e < experts; ++e)  // strictly larger: a tie goes to the lower expert
        if (!already_chosen(mine, j, e) && (best < 0 || p[e] > p[best])) best = e;
      mine[j] = best;
      kept += (w[j] = p[best]);
    }
    for (int j = 0; j < k; ++j) w[j] /= kept;
  });
}

void sort_by_expert(const int* chosen, int rows, int k, int experts, int capacity, int* offsets, int* order, int* slot,
                    float* counts) {
  const double assignments = static_cast<double>(rows) * k;
  declare_kernel_cost(
      KernelCost::of_floats((1.0 + experts) * assignments, 2.0 * assignments + 2.0 * experts, experts * assignments));
  in_one_thread("sort_by_expert", KOKKOS_LAMBDA() {
    const int total = rows * k;
    for (int e = 0; e < experts; ++e) counts[e] = 0.0f;
    for (int a = 0; a < total; ++a) counts[chosen[a]] += 1.0f;
    offsets[0] = 0;
    for (int e = 0; e < experts; ++e) {
      const int wanted = static_cast<int>(counts[e]);
      offsets[e + 1] = offsets[e] + (wanted < capacity ? wanted : capacity);
    }
    // Expert by expert, its assignments in token order until its rows are full.
    for (int e = 0; e < experts; ++e) {
      int next = offsets[e];
      for (int a = 0; a < total; ++a) {
        if (chosen[a] != e) continue;
        const bool room = next < offsets[e + 1];
        slot[a] = room ? next : -1;
        if (room) order[next++] = a;
      }
    }
  });
}

void add_load_balance(const float* probs, const float* counts, int rows, int experts, double scale, double* aux_sum,
                      float* tokens_per_expert) {
  const double n = static_cast<double>(rows) * experts;
  declare_kernel_cost(KernelCost::of_floats(n + 3.0 * experts, 2.0 + 2.0 * experts, 2.0 * n));
  in_one_thread("add_load_balance", KOKKOS_LAMBDA() {
    double sum = 0.0;
    for (int t = 0; t < rows; ++t) {
      const float* p = probs + static_cast<long>(t) * experts;
      for (int e = 0; e < experts; ++e) sum += static_cast<double>(counts[e]) * p[e];
    }
    aux_sum[0] += scale * sum;
    if (tokens_per_expert)
      for (int e = 0; e < experts; ++e) tokens_per_expert[e] += counts[e];
  });
}

void gather_assigned_rows(ProductInput out, const float* x, const int* order, int kept, int k, int C) {
  const double n = static_cast<double>(kept) * C;
  declare_kernel_cost(KernelCost::of_floats(n + kept, out.bf16 ? 0.5 * n : n, 0.0));
  for_each_row("gather_assigned_rows", kept, KOKKOS_LAMBDA(const RowTeam& team, int p) {
    const float* row = x + static_cast<long>(order[p] / k) * C;
    const long first = static_cast<long>(p) * C;
    row_for(team, 0, C, [&](int c) { store(out, first + c, row[c]); });
  });
}

void combine_expert_outputs(float* out, const float* residual, const float* y, const int* slot, const float* weights,
                            int rows, int k, int C) {
  const double n = static_cast<double>(rows) * C;
  declare_kernel_cost(KernelCost::of_floats((1.0 + k) * n + 2.0 * rows * k, n, 2.0 * k * n));
  for_each_row("combine_expert_outputs", rows, KOKKOS_LAMBDA(const RowTeam& team, int t) {
    const long row = static_cast<long>(t) * C;
    row_for(team, 0, C, [&](int c) {
      float sum = residual[row + c];
      for (int j = 0; j < k; ++j) {
        const int p = slot[t * k + j];
        if (p >= 0) sum += weights[t * k + j] * y[static_cast<long>(p) * C + c];
      }
      out[row + c] = sum;
    });
  });
}

void expert_output_grads(float* dy, float* dweights, const float* dout, const float* y, const int* slot,
                         const float* weights, int rows, int k, int C) {
  const double n = static_cast<double>(rows) * k * C;
  declare_kernel_cost(KernelCost::of_floats(2.0 * n + 2.0 * rows * k, n + rows * k, 3.0 * n));
  for_each_row("expert_output_grads", rows, KOKKOS_LAMBDA(const RowTeam& team, int t) {
    const float* d = dout + static_cast<long>(t) * C;
    for (int j = 0; j < k; ++j) {
      const int a = t * k + j, p = slot[a];
      if (p < 0) {
        once_per_row(team, [&] { dweights[a] = 0.0f; });
        continue;
      }
      const long row = static_cast<long>(p) * C;
      const float dot = row_sum(team, C, [&](int c) { return d[c] * y[row + c]; });  // read before dy overwrites
      const float w = weights[a];
      row_for(team, 0, C, [&](int c) { dy[row + c] = w * d[c]; });
      once_per_row(team, [&] { dweights[a] = dot; });
    }
  });
}

void sum_assigned_rows(float* dx, const float* dx_assigned, const int* slot, int rows, int k, int C) {
  const double n = static_cast<double>(rows) * C;
  declare_kernel_cost(KernelCost::of_floats(k * n + rows * k, n, k * n));
  for_each_row("sum_assigned_rows", rows, KOKKOS_LAMBDA(const RowTeam& team, int t) {
    const long row = static_cast<long>(t) * C;
    row_for(team, 0, C, [&](int c) {
      float sum = 0.0f;
      for (int j = 0; j < k; ++j) {
        const int p = slot[t * k + j];
        if (p >= 0) sum += dx_assigned[static_cast<long>(p) * C + c];
      }
      dx[row + c] = sum;
    });
  });
}

void route_backward(float* dlogits, const float* probs, const int* chosen, const float* weights,
                    const float* dweights, const float* counts, float aux_scale, int rows, int experts, int k) {
  const double n = static_cast<double>(rows) * experts;
  declare_kernel_cost(KernelCost::of_floats(n + 3.0 * rows * k + experts, n, 6.0 * n));
  for_each_token("route_backward", rows, KOKKOS_LAMBDA(int t) {
    const float* p = probs + static_cast<long>(t) * experts;
    float* d = dlogits + static_cast<long>(t) * experts;
    const int* mine = chosen + static_cast<long>(t) * k;
    // w_j = p_j / S with S the sum of the k chosen probabilities: dp_j = (dw_j − Σ_i w_i dw_i) / S.
    float kept = 0.0f, weighted = 0.0f;
    for (int j = 0; j < k; ++j) kept += p[mine[j]], weighted += weights[t * k + j] * dweights[t * k + j];
    for (int e = 0; e < experts; ++e) d[e] = aux_scale * counts[e];
    for (int j = 0; j < k; ++j) d[mine[j]] += (dweights[t * k + j] - weighted) / kept;
    // The softmax: dlogit_e = p_e (dp_e − Σ_f p_f dp_f).
    float mean = 0.0f;
    for (int e = 0; e < experts; ++e) mean += p[e] * d[e];
    for (int e = 0; e < experts; ++e) d[e] = p[e] * (d[e] - mean);
  });
}

}  // namespace trident
