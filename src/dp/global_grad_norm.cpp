#include "dp/global_grad_norm.hpp"

#include "dp/tensor_pieces.hpp"
#include "model/families.hpp"
#include "optim/grad_norm.hpp"

namespace trident {

namespace {

// Without ZeRO-1 but with expert parallelism the replicas differ in their experts only: the dense
// tensors are counted on the first replica, each expert on the first replica holding it (dp < ep),
// and the sum runs over dp.
bool replica_counts(const ParamTensor& tensor, const GradientSync& sync, const ProcessGrid& grid) {
  if (sync.zero1() || grid.ep_size() == 1) return true;
  return tensor.expert >= 0 ? grid.dp_rank() < grid.ep_size() : grid.dp_rank() == 0;
}

}  // namespace

GlobalGradNorm::GlobalGradNorm(const GradientSync& sync, const ProcessGrid& grid)
    : sync_(sync),
      grid_(grid),
      counted_(held_pieces(sync,
                           [&](const ParamTensor& tensor) {
                             const bool tp_counted = tensor.tp_sharded() || grid.tp_rank() == 0;
                             const bool tied_head_copy = is_token_embedding(tensor.name) && !grid.first_stage();
                             return tp_counted && !tied_head_copy && replica_counts(tensor, sync, grid);
                           })) {}

void GlobalGradNorm::compute(double* squared) {
  sum_of_squares(squared, counted_, sync_.reduced_grads());
  grid_.tp_group->queue_all_reduce_sum(squared, 1);
  grid_.pp_group->queue_all_reduce_sum(squared, 1);
  if (sync_.zero1() || grid_.ep_size() > 1) grid_.dp_cp_group->queue_all_reduce_sum(squared, 1);
}

}  // namespace trident
