// fused_rows.hpp on the GPU build: the CUDA row kernels on the stream Kokkos' kernels run on, for
// the shapes they take, each shown to Kokkos Tools under its Kokkos kernel's label. Candidates until a
// GPU check shows them equal to the Kokkos kernels (bench/gpu_check.sh): on only with
// TRIDENT_FUSED_NORMS=1 and TRIDENT_FUSED_CROSS_ENTROPY=1.
#include "common/env_switch.hpp"
#include "gpu/cross_entropy.hpp"
#include "gpu/norm_backward.hpp"
#include "kernels/device.hpp"
#include "kernels/fused_rows.hpp"
#include "kernels/profile.hpp"

namespace trident::fused_rows {

namespace {

bool fused_norms_on() {
  static const bool on = environment_says("TRIDENT_FUSED_NORMS", "1");
  return on;
}

bool fused_cross_entropy_on() {
  static const bool on = environment_says("TRIDENT_FUSED_CROSS_ENTROPY", "1");
  return on;
}

}  // namespace

// The Kokkos kernel's scratch is sized for every warp of its teams; the CUDA kernel needs a slice a block.
static_assert(kNormBackwardBlocks <= kColumnSumTeams * kWarpRowsPerTeam);

bool norm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x, const float* mean,
                   const float* rstd, const float* weight, int rows, int C, const ColumnSumScratch& scratch) {
  const NormBackwardArgs args{dx, dweight, dbias, dout, x, mean, rstd, weight, rows, C, scratch.partials,
                              scratch.finished};
  if (!fused_norms_on() || !norm_backward_supports(args)) return false;
  const ForeignKernel kernel(mean ? "layernorm_backward" : "rmsnorm_backward");
  trident::norm_backward(args, ExecSpace().cuda_stream());
  return true;
}

bool cross_entropy(float* logits, float* losses, const int* targets, int rows, int V, double* loss_sum) {
  if (!fused_cross_entropy_on() || !cross_entropy_supports(logits, V)) return false;
  const double elements = static_cast<double>(rows) * V;  // two passes: the logits read twice, written once
  declare_kernel_cost(KernelCost::of_floats(2.0 * elements + rows, elements + rows, 5.0 * elements));
  const ForeignKernel kernel("softmax_cross_entropy");
  trident::cross_entropy(logits, losses, targets, rows, V, loss_sum, ExecSpace().cuda_stream());
  return true;
}

}  // namespace trident::fused_rows
