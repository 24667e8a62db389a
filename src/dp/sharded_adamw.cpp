#include "dp/sharded_adamw.hpp"

#include <stdexcept>

#include "dp/tensor_pieces.hpp"
#include "kernels/copy.hpp"
#include "optim/adamw.hpp"

namespace trident {

ShardedAdamW::ShardedAdamW(GradientSync& sync, const TrainConfig& train)
    : m("zero1_adamw_m", sync.shard_size()),
      v("zero1_adamw_v", sync.shard_size()),
      sync_(sync),
      train_(train),
      runs_(held_pieces(sync, [](const ParamTensor&) { return true; })) {
  if (!sync.zero1()) throw std::logic_error("ShardedAdamW needs a GradientSync in ZeRO-1 mode");
}

void ShardedAdamW::update(ParamStore& params, int step, double lr, const GradClip& clip) {
  if (&params != &sync_.params())
    throw std::logic_error("ShardedAdamW::step: not the parameter store its GradientSync reduces");
  AdamWUpdate(train_, step, lr).apply(runs_, params.values.data(), sync_.reduced_grads(), m.data(), v.data(), clip);
  sync_.all_gather_params();
  params.refresh_bf16_copy();  // the other ranks' pieces arrived in fp32
}

Optimizer::Moments ShardedAdamW::full_moments() {
  const std::size_t n = sync_.params().total_size();
  Moments full{FloatBuffer("zero1_full_m", n), FloatBuffer("zero1_full_v", n)};
  for (auto [pieces, whole] : {std::pair{&m, &full.m}, std::pair{&v, &full.v}}) {
    for (const HeldRange& range : sync_.held_ranges())
      copy_floats(whole->data() + range.offset, pieces->data() + range.local, range.count);
    sync_.all_gather_in_place(*whole);
  }
  return full;
}

void ShardedAdamW::import_moments(const Moments& moments) {
  for (auto [whole, pieces] : {std::pair{&moments.m, &m}, std::pair{&moments.v, &v}})
    for (const HeldRange& range : sync_.held_ranges())
      copy_floats(pieces->data() + range.local, whole->data() + range.offset, range.count);
}

}  // namespace trident
