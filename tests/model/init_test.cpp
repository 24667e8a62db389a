#include "model/init.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "model_test_support.hpp"

namespace trident {
namespace {

using namespace testing;

std::vector<float> tensor_values(const Transformer& model, const std::string& name) {
  return to_host(tensor_view(model.params().values, model.params().find(name)));
}

TEST(CounterInit, ValueDependsOnlyOnSeedNameAndIndex) {
  EXPECT_EQ(counter_normal(7, "h.0.attn.c_attn.weight", 123), counter_normal(7, "h.0.attn.c_attn.weight", 123));
  EXPECT_NE(counter_normal(7, "h.0.attn.c_attn.weight", 123), counter_normal(8, "h.0.attn.c_attn.weight", 123));
  EXPECT_NE(counter_normal(7, "h.0.attn.c_attn.weight", 123), counter_normal(7, "h.1.attn.c_attn.weight", 123));
  EXPECT_NE(counter_normal(7, "h.0.attn.c_attn.weight", 123), counter_normal(7, "h.0.attn.c_attn.weight", 124));
}

// Models of different depth and micro-batch size allocate their tensors at different offsets,
// yet a tensor present in both starts identical: what a sharded grid relies on.
TEST(CounterInit, SameTensorIdenticalAcrossDifferentModels) {
  ModelConfig deeper = tiny_config();
  deeper.layers = 3;
  const Transformer a(tiny_config(), 2, 42, no_tp()), b(deeper, 3, 42, no_tp());
  for (const char* name : {"wte.weight", "wpe.weight", "h.1.attn.c_attn.weight", "h.1.mlp.c_fc.weight"})
    EXPECT_EQ(tensor_values(a, name), tensor_values(b, name)) << name;
  // And each element is the pure function of (seed, name, index) a shard would evaluate.
  const auto c_fc = tensor_values(a, "h.1.mlp.c_fc.weight");
  for (std::size_t i = 0; i < c_fc.size(); i += 97)
    EXPECT_EQ(c_fc[i], init_std(tiny_config(), TensorInit::normal) * counter_normal(42, "h.1.mlp.c_fc.weight", i));
}

TEST(CounterInit, DifferentSeedsGiveDifferentWeights) {
  const Transformer a(tiny_config(), 1, 1, no_tp()), b(tiny_config(), 1, 2, no_tp());
  const auto x = tensor_values(a, "wte.weight"), y = tensor_values(b, "wte.weight");
  int equal = 0;
  for (std::size_t i = 0; i < x.size(); ++i) equal += x[i] == y[i];
  EXPECT_EQ(equal, 0);
}

TEST(CounterInit, SamplesAreStandardNormal) {
  const int n = 200000;
  double sum = 0.0, squares = 0.0;
  int within_one = 0;
  for (int i = 0; i < n; ++i) {
    const double z = counter_normal(3, "stats", i);
    sum += z;
    squares += z * z;
    within_one += std::abs(z) < 1.0;
  }
  const double mean = sum / n, stddev = std::sqrt(squares / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(stddev, 1.0, 0.01);
  EXPECT_NEAR(double(within_one) / n, 0.6827, 0.005);
}

double stddev_of(const std::vector<float>& values) {
  double sum = 0.0, squares = 0.0;
  for (float v : values) sum += v, squares += double(v) * v;
  const double mean = sum / values.size();
  return std::sqrt(squares / values.size() - mean * mean);
}

TEST(CounterInit, Gpt2SchemeScalesResidualProjections) {
  ModelConfig cfg = tiny_config();
  cfg.d_model = 64;
  cfg.vocab = 256;
  cfg.layers = 8;
  const Transformer model(cfg, 1, 5, no_tp());
  const double projection_std = 0.02 / std::sqrt(2.0 * cfg.layers);
  EXPECT_NEAR(stddev_of(tensor_values(model, "h.3.mlp.c_fc.weight")), 0.02, 0.02 * 0.03);
  EXPECT_NEAR(stddev_of(tensor_values(model, "wte.weight")), 0.02, 0.02 * 0.03);
  EXPECT_NEAR(stddev_of(tensor_values(model, "h.3.mlp.c_proj.weight")), projection_std, projection_std * 0.03);
  EXPECT_NEAR(stddev_of(tensor_values(model, "h.3.attn.c_proj.weight")), projection_std, projection_std * 0.06);
  for (float v : tensor_values(model, "h.3.attn.c_attn.bias")) ASSERT_EQ(v, 0.0f);
  for (float v : tensor_values(model, "h.3.ln_2.weight")) ASSERT_EQ(v, 1.0f);
  for (float v : tensor_values(model, "ln_f.bias")) ASSERT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace trident
