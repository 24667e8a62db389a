#include "dp/global_grad_norm.hpp"

#include <cmath>

#include "dp/tensor_pieces.hpp"
#include "model/families.hpp"
#include "optim/grad_norm.hpp"

namespace trident {

namespace {

bool counted_here(const ParamTensor& tensor, const ProcessGrid& grid) {
  const bool tp_counted = tensor.tp_sharded() || grid.tp_rank() == 0;
  const bool tied_head_copy = is_token_embedding(tensor.name) && !grid.first_stage();
  return tp_counted && !tied_head_copy;
}

}  // namespace

double global_grad_norm(const GradientSync& sync, const ProcessGrid& grid) {
  const float* grads = sync.reduced_grads();
  double local = 0.0;
  for (const HeldRange& range : sync.held_ranges()) {
    for_each_tensor_piece(sync.params(), range, [&](const ParamTensor& tensor, std::size_t, std::size_t count,
                                                    std::size_t held_at) {
      if (counted_here(tensor, grid)) local += sum_of_squares(grads + held_at, count);
    });
  }
  double total = grid.tp_group->all_reduce_sum(local);
  total = grid.pp_group->all_reduce_sum(total);
  if (sync.zero1()) total = grid.dp_group->all_reduce_sum(total);
  return std::sqrt(total);
}

}  // namespace trident
