#include "optim/grad_norm.hpp"

namespace trident {

double sum_of_squares(const float* data, std::size_t count) {
  double sum = 0.0;
  Kokkos::parallel_reduce(
      "sum_of_squares", Kokkos::RangePolicy<ExecSpace>(0, count),
      KOKKOS_LAMBDA(const std::size_t i, double& partial) {
        const double x = data[i];
        partial += x * x;
      },
      sum);
  return sum;
}

double grad_sum_of_squares(const ParamStore& params) {
  return sum_of_squares(params.grads.data(), params.total_size());
}

double clip_factor(double norm, double grad_clip) {
  return grad_clip > 0.0 && norm > grad_clip ? grad_clip / norm : 1.0;
}

}  // namespace trident
