// The model cut into chunks (pipeline stages, virtual stages) computes what the whole model does:
// the same loss and, tensor by tensor, the same gradients, whether backward runs in one piece (B),
// split into input and weight gradients (I then W, as zero-bubble schedules do), or with the
// activations recomputed from each chunk's input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/activation_arena.hpp"
#include "model_test_support.hpp"

namespace trident {
namespace {

using namespace testing;

ModelConfig four_layers() {
  ModelConfig cfg = tiny_config();
  cfg.layers = 4;
  return cfg;
}

// Gradients by tensor name, summed over the models that hold a copy (the tied wte lives on the
// first and the last stage).
std::map<std::string, std::vector<float>> grads_by_name(const std::vector<const Transformer*>& models) {
  std::map<std::string, std::vector<float>> out;
  for (const Transformer* model : models) {
    const std::vector<float> grads = to_host(model->params().grads);
    for (const ParamTensor& t : model->params().tensors()) {
      std::vector<float>& sum = out[t.name];
      sum.resize(t.size, 0.0f);
      for (std::size_t i = 0; i < t.size; ++i) sum[i] += grads[t.offset + i];
    }
  }
  return out;
}

void expect_same_grads(const std::map<std::string, std::vector<float>>& expected,
                       const std::map<std::string, std::vector<float>>& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  float largest = 0.0f;
  for (const auto& [name, g] : expected)
    for (float v : g) largest = std::max(largest, std::abs(v));
  ASSERT_GT(largest, 1e-3f);
  for (const auto& [name, g] : expected) {
    const std::vector<float>& h = actual.at(name);
    ASSERT_EQ(g.size(), h.size()) << name;
    for (std::size_t i = 0; i < g.size(); ++i)
      ASSERT_NEAR(h[i], g[i], 1e-5f * largest + 1e-4f * std::abs(g[i])) << name << "[" << i << "]";
  }
}

struct Reference {
  double loss = 0.0;
  std::map<std::string, std::vector<float>> grads;
};

Reference whole_model_run(const ModelConfig& cfg, int B, const std::vector<IntBuffer>& inputs,
                          const std::vector<IntBuffer>& targets, float scale) {
  Transformer whole(cfg, B, 5, no_tp());
  Reference ref;
  for (std::size_t mb = 0; mb < inputs.size(); ++mb) ref.loss += whole.forward(static_cast<int>(mb), inputs[mb], targets[mb]);
  for (std::size_t mb = 0; mb < inputs.size(); ++mb) whole.backward(static_cast<int>(mb), scale);
  ref.grads = grads_by_name({&whole});
  return ref;
}

class ChunkedModel : public ::testing::TestWithParam<std::tuple<WeightGrads, Recompute>> {};

// Three stages as three models (as three pipeline ranks would hold them), layers 1 | 2 | 1, two
// micro-batches in flight, messages passed as buffers.
TEST_P(ChunkedModel, ThreeStagesEqualTheWholeModel) {
  const auto [weight_grads, recompute] = GetParam();
  const ModelConfig cfg = four_layers();
  const int B = 2, BT = B * cfg.seq_len;
  const std::size_t hidden = static_cast<std::size_t>(BT) * cfg.d_model;
  const float scale = 1.0f / (2 * BT);
  const std::vector<IntBuffer> inputs = {random_tokens(BT, cfg.vocab, 1), random_tokens(BT, cfg.vocab, 2)};
  const std::vector<IntBuffer> targets = {random_tokens(BT, cfg.vocab, 3), random_tokens(BT, cfg.vocab, 4)};
  const Reference ref = whole_model_run(cfg, B, inputs, targets, scale);

  Transformer first(cfg, B, 5, no_tp(), {{0, 1, true, false}}, recompute);
  Transformer middle(cfg, B, 5, no_tp(), {{1, 2, false, false}}, recompute);
  Transformer last(cfg, B, 5, no_tp(), {{3, 1, false, true}}, recompute);
  EXPECT_THROW(middle.params().find("wte.weight"), std::out_of_range);
  EXPECT_THROW(first.params().find("ln_f.weight"), std::out_of_range);

  FloatBuffer a1("a1", 2 * hidden), a2("a2", 2 * hidden), g2("g2", 2 * hidden), g1("g1", 2 * hidden);
  auto at = [&](const FloatBuffer& b, int mb) { return b.data() + mb * hidden; };
  double loss = 0.0;
  for (int mb = 0; mb < 2; ++mb) {
    Transformer::ForwardIO io0, io1, io2;
    io0.tokens = &inputs[mb], io0.output = at(a1, mb);
    first.forward(0, mb, io0);
    io1.input = at(a1, mb), io1.output = at(a2, mb);
    middle.forward(0, mb, io1);
    io2.input = at(a2, mb), io2.targets = &targets[mb];
    last.forward(0, mb, io2);
  }
  loss = last.take_loss_sum();
  for (int mb = 1; mb >= 0; --mb) {
    last.backward(0, mb, scale, {nullptr, at(g2, mb)}, weight_grads);
    middle.backward(0, mb, scale, {at(g2, mb), at(g1, mb)}, weight_grads);
    first.backward(0, mb, scale, {at(g1, mb), nullptr}, weight_grads);
  }
  if (weight_grads == WeightGrads::deferred) {
    EXPECT_GT(middle.activation_bytes(), 0u);  // stashes wait for W
    for (Transformer* stage : {&first, &middle, &last})
      for (int mb = 0; mb < 2; ++mb) stage->weight_grad(0, mb);
  }
  for (Transformer* stage : {&first, &middle, &last}) EXPECT_EQ(stage->activation_bytes(), 0u);
  EXPECT_EQ(last.take_loss_sum(), 0.0);  // a forward recomputed for its backward adds no loss
  EXPECT_NEAR(loss, ref.loss, 1e-5 * ref.loss);
  expect_same_grads(ref.grads, grads_by_name({&first, &middle, &last}));
}

INSTANTIATE_TEST_SUITE_P(Modes, ChunkedModel,
                         ::testing::Combine(::testing::Values(WeightGrads::now, WeightGrads::deferred),
                                            ::testing::Values(Recompute::none, Recompute::full,
                                                              Recompute::selective)));

// Interleaved schedules: one rank holds two non-adjacent chunks (layers 0 and 2 of 4, like rank 0
// of two with two virtual stages each) in one parameter store.
TEST(ChunkedModel, OneRankHoldsTwoChunks) {
  const ModelConfig cfg = four_layers();
  const int B = 1, BT = B * cfg.seq_len;
  const std::size_t hidden = static_cast<std::size_t>(BT) * cfg.d_model;
  const std::vector<IntBuffer> inputs = {random_tokens(BT, cfg.vocab, 7)};
  const std::vector<IntBuffer> targets = {random_tokens(BT, cfg.vocab, 8)};
  const Reference ref = whole_model_run(cfg, B, inputs, targets, 1.0f / BT);

  Transformer rank0(cfg, B, 5, no_tp(), {{0, 1, true, false}, {2, 1, false, false}});
  Transformer rank1(cfg, B, 5, no_tp(), {{1, 1, false, false}, {3, 1, false, true}});
  EXPECT_THROW(rank0.params().find("h.1.ln_1.weight"), std::out_of_range);
  EXPECT_NO_THROW(rank0.params().find("h.2.ln_1.weight"));
  FloatBuffer x1("x1", hidden), x2("x2", hidden), x3("x3", hidden), d3("d3", hidden), d2("d2", hidden), d1("d1", hidden);
  Transformer::ForwardIO f0, f1, f2, f3;
  f0.tokens = &inputs[0], f0.output = x1.data();
  f1.input = x1.data(), f1.output = x2.data();
  f2.input = x2.data(), f2.output = x3.data();
  f3.input = x3.data(), f3.targets = &targets[0];
  rank0.forward(0, 0, f0);
  rank1.forward(0, 0, f1);
  rank0.forward(1, 0, f2);
  rank1.forward(1, 0, f3);
  const double loss = rank1.take_loss_sum();
  rank1.backward(1, 0, 1.0f / BT, {nullptr, d3.data()});
  rank0.backward(1, 0, 1.0f / BT, {d3.data(), d2.data()});
  rank1.backward(0, 0, 1.0f / BT, {d2.data(), d1.data()});
  rank0.backward(0, 0, 1.0f / BT, {d1.data(), nullptr});
  EXPECT_NEAR(loss, ref.loss, 1e-5 * ref.loss);
  expect_same_grads(ref.grads, grads_by_name({&rank0, &rank1}));
}

// Recomputation keeps only each chunk's input between forward and backward.
TEST(ChunkedModel, RecomputeStashesOnlyInputs) {
  const ModelConfig cfg = four_layers();
  const int B = 2, BT = B * cfg.seq_len;
  const std::size_t hidden = static_cast<std::size_t>(BT) * cfg.d_model;
  const ModelChunk middle_chunk{1, 2, false, false};
  Transformer kept(cfg, B, 5, no_tp(), {middle_chunk});
  Transformer recomputed(cfg, B, 5, no_tp(), {middle_chunk}, Recompute::full);
  FloatBuffer in("in", hidden), out("out", hidden);
  Kokkos::deep_copy(in, 0.5f);
  Transformer::ForwardIO io;
  io.input = in.data(), io.output = out.data();
  kept.forward(0, 0, io);
  recomputed.forward(0, 0, io);
  EXPECT_EQ(kept.activation_bytes(), stash_bytes(cfg, B, 1, middle_chunk));
  EXPECT_EQ(recomputed.activation_bytes(), stash_bytes(cfg, B, 1, middle_chunk, StashContent::inputs));
  EXPECT_EQ(recomputed.activation_bytes(), hidden * sizeof(float));
}

// Selective recomputation stashes all but the explicit attention kernel's probabilities, and
// rebuilds them with the same kernel: loss and gradients are bit for bit those of the stashed run.
TEST(ChunkedModel, SelectiveRecomputeDropsOnlyTheProbabilitiesAndChangesNoBit) {
  ModelConfig cfg = four_layers();
  cfg.attention = AttentionKernel::explicit_probabilities;
  const int B = 2, BT = B * cfg.seq_len;
  const ModelChunk whole{0, cfg.layers, true, true};
  const IntBuffer tokens = random_tokens(BT, cfg.vocab, 11), targets = random_tokens(BT, cfg.vocab, 12);
  Transformer kept(cfg, B, 5, no_tp(), {whole});
  Transformer selective(cfg, B, 5, no_tp(), {whole}, Recompute::selective);
  const double kept_loss = kept.forward(0, tokens, targets);
  const double selective_loss = selective.forward(0, tokens, targets);
  const std::size_t probabilities = static_cast<std::size_t>(cfg.layers) * B * cfg.heads * cfg.seq_len * cfg.seq_len;
  EXPECT_EQ(selective.activation_bytes(), kept.activation_bytes() - probabilities * sizeof(float));
  EXPECT_EQ(selective.activation_bytes(), stash_bytes(cfg, B, 1, whole, StashContent::without_probabilities));
  kept.backward(0, 1.0f / BT);
  selective.backward(0, 1.0f / BT);
  EXPECT_EQ(selective_loss, kept_loss);
  EXPECT_EQ(to_host(selective.params().grads), to_host(kept.params().grads));
}

// The tiled kernel keeps no probabilities: selective recomputation stashes what none does.
TEST(ChunkedModel, SelectiveRecomputeWithTiledAttentionKeepsTheSameStash) {
  const ModelConfig cfg = four_layers();
  ASSERT_EQ(cfg.attention, AttentionKernel::tiled);
  const int B = 2, BT = B * cfg.seq_len;
  const ModelChunk whole{0, cfg.layers, true, true};
  const IntBuffer tokens = random_tokens(BT, cfg.vocab, 11), targets = random_tokens(BT, cfg.vocab, 12);
  Transformer kept(cfg, B, 5, no_tp(), {whole});
  Transformer selective(cfg, B, 5, no_tp(), {whole}, Recompute::selective);
  EXPECT_EQ(selective.forward(0, tokens, targets), kept.forward(0, tokens, targets));
  EXPECT_EQ(selective.activation_bytes(), kept.activation_bytes());
  kept.backward(0, 1.0f / BT);
  selective.backward(0, 1.0f / BT);
  EXPECT_EQ(to_host(selective.params().grads), to_host(kept.params().grads));
}

}  // namespace
}  // namespace trident
