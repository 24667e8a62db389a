// One Llama block on one rank: its backward against central differences of its forward, for the
// block input and every weight, with grouped-query attention (4 query heads on 2 kv heads); and
// the deferred weight gradients (I then W) equal to the immediate ones.
#include "model/llama_block.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "llama_block_case.hpp"

namespace trident {
namespace {

using namespace testing;

TEST(LlamaBlock, BackwardMatchesFiniteDifferencesWithGroupedQueryAttention) {
  BlockCase block;
  const FloatBuffer proj = random_buffer(block.rows * block.cfg.d_model, 2);
  auto objective = [&] {
    block.forward();
    return dot(proj, block.output());
  };
  block.forward();
  FloatBuffer dresidual("dresidual", proj.size());
  Kokkos::deep_copy(dresidual, proj);
  LlamaBlock::backward(block.ctx, block.weights(), block.grads(), block.stash, block.input.data(), dresidual.data(),
                       LlamaBlock::in_place(block.ctx, dresidual.data()), WeightGrads::now);
  expect_gradient("input", block.input, to_host(dresidual), objective, 1e-2f);
  const std::vector<float> grads = to_host(block.params.grads);
  for (const ParamTensor& tensor : block.params.tensors()) {
    const FloatBuffer values = Kokkos::subview(
        block.params.values, std::pair<std::size_t, std::size_t>(tensor.offset, tensor.offset + tensor.size));
    const std::vector<float> analytic(grads.begin() + tensor.offset, grads.begin() + tensor.offset + tensor.size);
    expect_gradient(tensor.name, values, analytic, objective, 1e-2f);
  }
}

TEST(LlamaBlock, DeferredWeightGradientsEqualImmediateOnes) {
  BlockCase now, deferred;
  const FloatBuffer proj = random_buffer(now.rows * now.cfg.d_model, 3);
  FloatBuffer d_now("d_now", proj.size()), d_deferred("d_deferred", proj.size());
  Kokkos::deep_copy(d_now, proj);
  Kokkos::deep_copy(d_deferred, proj);
  now.forward();
  deferred.forward();
  LlamaBlock::backward(now.ctx, now.weights(), now.grads(), now.stash, now.input.data(), d_now.data(),
                       LlamaBlock::in_place(now.ctx, d_now.data()), WeightGrads::now);
  LlamaBlock::backward(deferred.ctx, deferred.weights(), deferred.grads(), deferred.stash, deferred.input.data(),
                       d_deferred.data(), deferred.kept, WeightGrads::deferred);
  EXPECT_EQ(to_host(d_deferred), to_host(d_now));  // the input gradient does not wait for W
  LlamaBlock::weight_grad(deferred.ctx, deferred.grads(), deferred.stash, deferred.kept);
  EXPECT_EQ(to_host(deferred.params.grads), to_host(now.params.grads));
}

}  // namespace
}  // namespace trident
