// Global-norm gradient clipping without the host: a reduction leaves the sum of squares in device
// memory, the data-parallel code sums it over the grid there (dp/global_grad_norm.hpp), and the
// optimizer's kernel turns it into the clip factor as it reads the gradients (optim/optimizer.hpp's
// GradClip). The host reads the norm once, for the step's record.
#pragma once

#include "kernels/device.hpp"
#include "kernels/math.hpp"
#include "optim/element_runs.hpp"

namespace trident {

// *total (one device double) = Σ data[run.local + i]² over every run and element: each run summed
// in fp32 (vectorised lanes on the CPU, a team on the GPU), the runs' sums in fp64 (4096 squares
// lose nothing that matters to a norm; one fp64 add per element is a chain of dependent adds that
// ran at a tenth of the memory bandwidth). Queued: the host does not wait for it.
void sum_of_squares(double* total, const ElementRuns& runs, const float* data);

// max_norm / √norm_squared when that is below 1, else 1; max_norm ≤ 0 turns clipping off. Computed
// in fp64 and rounded once, on the host or inside a kernel alike.
KOKKOS_INLINE_FUNCTION float clip_factor(double norm_squared, double max_norm) {
  const double norm = math::sqrt(norm_squared);
  return max_norm > 0.0 && norm > max_norm ? static_cast<float>(max_norm / norm) : 1.0f;
}

}  // namespace trident
