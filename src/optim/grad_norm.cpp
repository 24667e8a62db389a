#include "optim/grad_norm.hpp"

namespace trident {

double grad_sum_of_squares(const ParamStore& params) {
  const float* grads = params.grads.data();
  double sum = 0.0;
  Kokkos::parallel_reduce(
      "grad_sum_of_squares", Kokkos::RangePolicy<ExecSpace>(0, params.total_size()),
      KOKKOS_LAMBDA(const std::size_t i, double& partial) {
        const double g = grads[i];
        partial += g * g;
      },
      sum);
  return sum;
}

void scale_grads(ParamStore& params, float factor) {
  float* grads = params.grads.data();
  Kokkos::parallel_for(
      "scale_grads", Kokkos::RangePolicy<ExecSpace>(0, params.total_size()),
      KOKKOS_LAMBDA(const std::size_t i) { grads[i] *= factor; });
}

double clip_factor(double norm, double grad_clip) {
  return grad_clip > 0.0 && norm > grad_clip ? grad_clip / norm : 1.0;
}

}  // namespace trident
