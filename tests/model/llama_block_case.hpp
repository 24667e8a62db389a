// One Llama block set up on this rank for the block tests and the PyTorch reference dump: a small
// grouped-query shape (4 query heads on 2 kv heads), random weights, its stash, scratch and context.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "gradient_check.hpp"
#include "kernels/attention.hpp"
#include "model/llama_block.hpp"
#include "model_test_support.hpp"

namespace trident::testing {

ModelConfig llama_block_config() {
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

// The same block with a mixture of experts for its MLP (Mixtral's): 4 experts of F 12, top 2, a
// load-balancing loss weighted so that its gradient shows.
ModelConfig mixture_block_config() {
  ModelConfig cfg = llama_block_config();
  cfg.moe.experts = 4;
  cfg.moe.top_k = 2;
  cfg.moe.expert_ffn_hidden = 12;
  cfg.moe.aux_loss_coef = 0.25;
  return cfg;
}

// A block with its parameters, stash, scratch and context, all on this rank.
struct BlockCase {
  static constexpr int B = 2;
  ModelConfig cfg;
  TpShape local{cfg, 0, 1};
  std::size_t rows = static_cast<std::size_t>(B) * cfg.seq_len, C = cfg.d_model, F = cfg.mlp_hidden();
  ParamStore params;
  GemmContext gemm;
  RopeTable rope{cfg.seq_len, cfg.head_dim(), cfg.rope_theta};
  AttentionShape heads = attention_heads(cfg, B, 1);
  FloatBuffer dln{"dln", rows*C}, datty{"datty", rows*C}, attention{"attention", attention_scratch_floats(heads)},
      dfch{"dfch", rows * 2 * F}, dqkv{"dqkv", rows * 3 * C};
  ColumnSumBuffers norm_grad_sums{1, static_cast<int>(C)};
  std::unique_ptr<MoeContext> moe = cfg.moe.experts > 0 ? std::make_unique<MoeContext>(cfg, rows) : nullptr;
  LayerContext ctx{B,
                   cfg.seq_len,
                   cfg.d_model,
                   local,
                   no_tp(),
                   gemm,
                   {nullptr, dln.data(), datty.data(), attention.data(), dfch.data(), dqkv.data(), nullptr, nullptr,
                    nullptr, norm_grad_sums.scratch()},
                   &rope,
                   1e-5f};
  LlamaBlock::Stash stash{};
  LlamaBlock::OutputGrads kept{};
  FloatBuffer stash_floats = carved(stash, [&](auto& x, auto&& take) {
    LlamaBlock::carve(
        x,
        StashShape{local, B, static_cast<std::size_t>(cfg.seq_len), C, rows, attention_saved_floats(heads), false,
                   moe_shape(cfg, 0, rows, 1)},
        take);
  });
  FloatBuffer kept_floats = carved(kept, [&](auto& g, auto&& take) { LlamaBlock::carve(g, local, rows, C, take); });
  FloatBuffer input = random_buffer(rows * C, 1);

  // Weights well away from 0 (norm weights near 1), so every path carries a visible gradient.
  explicit BlockCase(const ModelConfig& config = llama_block_config()) : cfg(config) {
    ctx.moe = moe.get();
    for (const TensorSpec& tensor : layer_tensors(cfg, 0)) params.add(tensor);
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
  LlamaBlock::Weights weights() const { return LlamaBlock::tensors(params.values, params, "layers.0."); }
  LlamaBlock::Weights grads() const { return LlamaBlock::tensors(params.grads, params, "layers.0."); }
  void forward() { LlamaBlock::forward(ctx, weights(), stash, input.data()); }
  FloatBuffer output() const {
    const std::size_t first = stash.residual3 - stash_floats.data();
    return Kokkos::subview(stash_floats, std::pair<std::size_t, std::size_t>(first, first + rows * C));
  }
};

}  // namespace trident::testing
