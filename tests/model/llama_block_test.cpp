// One Llama block on one rank: its backward against central differences of its forward, for the
// block input and every weight, with grouped-query attention (4 query heads on 2 kv heads); and
// the deferred weight gradients (I then W) equal to the immediate ones.
#include "model/llama_block.hpp"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "gradient_check.hpp"
#include "model_test_support.hpp"

namespace trident {
namespace {

using namespace testing;

ModelConfig llama_config() {
  ModelConfig cfg;
  cfg.family = ModelFamily::llama;
  cfg.layers = 1;
  cfg.d_model = 16;
  cfg.heads = 4;
  cfg.kv_heads = 2;
  cfg.ffn_hidden = 24;
  cfg.seq_len = 5;
  cfg.vocab = 32;
  cfg.rope_theta = 100.0;  // angles that turn visibly within 5 positions
  return cfg;
}

// Carves `record` out of a new buffer: counting first, then for real.
template <class Record, class Carve>
FloatBuffer carved(Record& record, const Carve& carve) {
  std::size_t count = 0;
  carve(record, [&](std::size_t n) { return count += n, static_cast<float*>(nullptr); });
  FloatBuffer buffer("carved", count);
  float* next = buffer.data();
  carve(record, [&](std::size_t n) { return std::exchange(next, next + n); });
  return buffer;
}

// A block with its parameters, stash, scratch and context, all on this rank.
struct BlockCase {
  static constexpr int B = 2;
  ModelConfig cfg = llama_config();
  TpShape local{cfg, 0, 1};
  std::size_t rows = static_cast<std::size_t>(B) * cfg.seq_len, C = cfg.d_model, F = cfg.mlp_hidden();
  ParamStore params;
  GemmContext gemm;
  RopeTable rope{cfg.seq_len, cfg.head_dim(), cfg.rope_theta};
  FloatBuffer dln{"dln", rows*C}, datty{"datty", rows*C},
      datt{"datt", static_cast<std::size_t>(B) * cfg.heads*cfg.seq_len*cfg.seq_len}, dfch{"dfch", rows*F},
      dqkv{"dqkv", rows * 3 * C}, dup{"dup", rows*F};
  LayerContext ctx{B,
                   cfg.seq_len,
                   cfg.d_model,
                   local,
                   no_tp(),
                   gemm,
                   {dln.data(), datty.data(), datt.data(), dfch.data(), dqkv.data(), dup.data()},
                   &rope,
                   1e-5f};
  LlamaBlock::Stash stash{};
  LlamaBlock::OutputGrads kept{};
  FloatBuffer stash_floats =
      carved(stash, [&](auto& x, auto&& take) { LlamaBlock::carve(x, local, B, cfg.seq_len, C, take); });
  FloatBuffer kept_floats = carved(kept, [&](auto& g, auto&& take) { LlamaBlock::carve(g, local, rows, C, take); });
  FloatBuffer input = random_buffer(rows * C, 1);

  // Weights well away from 0 (norm weights near 1), so every path carries a visible gradient.
  BlockCase() {
    LlamaBlock::add_parameters(params, cfg, 0);
    params.allocate();
    std::vector<float> values(params.total_size());
    std::uint64_t seed = 10;
    for (const ParamTensor& tensor : params.tensors()) {
      const bool norm = tensor.name.find("layernorm") != std::string::npos;
      const auto v = random_values(tensor.size, ++seed, norm ? 0.2f : 0.4f, norm ? 1.0f : 0.0f);
      std::copy(v.begin(), v.end(), values.begin() + tensor.offset);
    }
    copy_to(params.values, values);
  }
  LlamaBlock::Weights weights() const { return LlamaBlock::tensors(params.values, params, 0); }
  LlamaBlock::Weights grads() const { return LlamaBlock::tensors(params.grads, params, 0); }
  void forward() { LlamaBlock::forward(ctx, weights(), stash, input.data()); }
  FloatBuffer output() const {
    const std::size_t first = stash.residual3 - stash_floats.data();
    return Kokkos::subview(stash_floats, std::pair<std::size_t, std::size_t>(first, first + rows * C));
  }
};

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
