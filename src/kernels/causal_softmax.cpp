#include "kernels/causal_softmax.hpp"

#include "kernels/device.hpp"
#include "kernels/math.hpp"

namespace trident {

void causal_softmax_forward(float* scores, int blocks, int T) {
  Kokkos::parallel_for("causal_softmax_forward", Kokkos::RangePolicy<ExecSpace>(0, blocks * T), KOKKOS_LAMBDA(int r) {
    const int t = r % T;
    float* row = scores + static_cast<long>(r) * T;
    float largest = row[0];
#pragma omp simd reduction(max : largest)
    for (int j = 1; j <= t; ++j) largest = row[j] > largest ? row[j] : largest;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j <= t; ++j) {
      row[j] = math::fast_exp(row[j] - largest);
      sum += row[j];
    }
    const float inverse = 1.0f / sum;
    for (int j = 0; j <= t; ++j) row[j] *= inverse;
    for (int j = t + 1; j < T; ++j) row[j] = 0.0f;
  });
}

void causal_softmax_backward(float* d, const float* probs, int blocks, int T) {
  Kokkos::parallel_for("causal_softmax_backward", Kokkos::RangePolicy<ExecSpace>(0, blocks * T), KOKKOS_LAMBDA(int r) {
    const int t = r % T;
    float* d_row = d + static_cast<long>(r) * T;
    const float* p_row = probs + static_cast<long>(r) * T;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j <= t; ++j) dot += p_row[j] * d_row[j];
    for (int j = 0; j <= t; ++j) d_row[j] = p_row[j] * (d_row[j] - dot);
    for (int j = t + 1; j < T; ++j) d_row[j] = 0.0f;
  });
}

}  // namespace trident
