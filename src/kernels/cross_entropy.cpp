#include "kernels/cross_entropy.hpp"

#include "kernels/device.hpp"
#include "kernels/math.hpp"

namespace trident {

double softmax_cross_entropy(float* logits, float* losses, const int* targets, int rows, int V) {
  double loss_sum = 0.0;
  Kokkos::parallel_reduce(
      "softmax_cross_entropy", Kokkos::RangePolicy<ExecSpace>(0, rows),
      KOKKOS_LAMBDA(int r, double& sum) {
        float* row = logits + static_cast<long>(r) * V;
        float largest = row[0];
#pragma omp simd reduction(max : largest)
        for (int v = 1; v < V; ++v) largest = row[v] > largest ? row[v] : largest;
        const float target_logit = row[targets[r]];
        float exp_sum = 0.0f;
#pragma omp simd reduction(+ : exp_sum)
        for (int v = 0; v < V; ++v) {
          row[v] = math::fast_exp(row[v] - largest);
          exp_sum += row[v];
        }
        const float inverse = 1.0f / exp_sum;
        for (int v = 0; v < V; ++v) row[v] *= inverse;
        row[targets[r]] -= 1.0f;
        losses[r] = math::log(exp_sum) - (target_logit - largest);
        sum += losses[r];
      },
      loss_sum);
  return loss_sum;
}

}  // namespace trident
