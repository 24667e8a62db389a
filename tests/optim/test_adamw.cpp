// AdamW against a plain scalar implementation of the update in double precision.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/matmul_precision.hpp"
#include "optim/adamw.hpp"
#include "param_fixture.hpp"

namespace trident {
namespace {

using optim_test::from_host;
using optim_test::to_host;

// One parameter element as the textbook describes AdamW with decoupled decay.
struct ScalarAdamW {
  double p, m = 0, v = 0;
  void step(double g, int t, double lr, const TrainConfig& train, bool decayed) {
    m = train.beta1 * m + (1 - train.beta1) * g;
    v = train.beta2 * v + (1 - train.beta2) * g * g;
    const double m_hat = m / (1 - std::pow(train.beta1, t));
    const double v_hat = v / (1 - std::pow(train.beta2, t));
    p -= lr * (m_hat / (std::sqrt(v_hat) + train.eps) + (decayed ? train.weight_decay : 0.0) * p);
  }
};

// Runs four steps with changing gradients on the weight + bias store and the reference.
void expect_matches_reference(const TrainConfig& train) {
  ParamStore params = optim_test::weight_and_bias();
  const std::size_t n = params.total_size();
  const std::size_t weight_size = params.find("h.0.mlp.c_fc.weight").size;
  ASSERT_TRUE(params.find("h.0.mlp.c_fc.weight").weight_decay);
  ASSERT_FALSE(params.find("h.0.mlp.c_fc.bias").weight_decay);

  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = 0.5f - 0.07f * static_cast<float>(i);
  from_host(params.values, values);
  std::vector<ScalarAdamW> reference;
  for (float value : values) reference.push_back({value});

  AdamW adamw(params, train);
  for (int t = 1; t <= 4; ++t) {
    const double lr = 1e-2 * t;
    std::vector<float> grads(n);
    for (std::size_t i = 0; i < n; ++i) grads[i] = std::sin(0.9f * static_cast<float>(i) + 1.3f * t);
    from_host(params.grads, grads);
    adamw.step(params, t, lr);
    for (std::size_t i = 0; i < n; ++i) reference[i].step(grads[i], t, lr, train, i < weight_size);

    const std::vector<float> got = to_host(params.values);
    const std::vector<float> m = to_host(adamw.m);
    const std::vector<float> v = to_host(adamw.v);
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_NEAR(got[i], reference[i].p, 1e-6) << "step " << t << " element " << i;
      EXPECT_NEAR(m[i], reference[i].m, 1e-6) << "step " << t << " element " << i;
      EXPECT_NEAR(v[i], reference[i].v, 1e-6) << "step " << t << " element " << i;
    }
  }
}

TEST(AdamW, MatchesScalarReferenceWithoutWeightDecay) {
  TrainConfig train;
  train.weight_decay = 0.0;
  expect_matches_reference(train);
}

TEST(AdamW, MatchesScalarReferenceWithDecayOnTwoDimensionalWeightsOnly) {
  TrainConfig train;
  train.weight_decay = 0.5;  // large, so decaying the bias too would be far outside tolerance
  expect_matches_reference(train);
}

// With a zero gradient AdamW only decays: the 2-D weight shrinks by lr · weight_decay, the bias
// stays. Every element, in a store of short tensors and in one whose tensors span several runs
// (kRunElements), each run with its tensor's decay.
void expect_zero_gradient_only_decays(ParamStore params) {
  Kokkos::deep_copy(params.values, 2.0f);
  TrainConfig train;
  train.weight_decay = 0.1;
  AdamW adamw(params, train);
  adamw.step(params, 1, 0.5);
  const std::vector<float> values = to_host(params.values);
  const ParamTensor& weight = params.find("h.0.mlp.c_fc.weight");
  const ParamTensor& bias = params.find("h.0.mlp.c_fc.bias");
  for (std::size_t i = 0; i < weight.size; ++i) ASSERT_FLOAT_EQ(values[weight.offset + i], 2.0f - 0.5f * 0.1f * 2.0f);
  for (std::size_t i = 0; i < bias.size; ++i) ASSERT_FLOAT_EQ(values[bias.offset + i], 2.0f);
}

TEST(AdamW, ZeroGradientOnlyDecaysWeights) {
  expect_zero_gradient_only_decays(optim_test::weight_and_bias());
  ParamStore long_tensors;
  long_tensors.add("h.0.mlp.c_fc.weight", {3, kRunElements});  // three runs, decayed
  long_tensors.add("h.0.mlp.c_fc.bias", {kRunElements + 5});    // two runs, not decayed
  long_tensors.allocate();
  expect_zero_gradient_only_decays(std::move(long_tensors));
}

// A squared norm in device memory, as GlobalGradNorm leaves it.
Kokkos::View<double, MemSpace> device_norm_squared(double value) {
  Kokkos::View<double, MemSpace> squared("norm_squared");
  Kokkos::deep_copy(squared, value);
  return squared;
}

// The clip factor is computed on the device from the squared norm and multiplies the gradients as
// they are read: the same update as scaling the gradients beforehand (norm 4 against a limit of 1:
// a quarter), and no scaling where the norm is within the limit.
TEST(AdamW, ClipFromTheDeviceNormEqualsScalingTheGradientsFirst) {
  TrainConfig train;
  const auto norm_squared = device_norm_squared(16.0);
  for (const double max_norm : {1.0, 8.0}) {
    const float factor = max_norm < 4.0 ? 0.25f : 1.0f;
    ParamStore clipped_inside = optim_test::weight_and_bias();
    ParamStore scaled_before = optim_test::weight_and_bias();
    const std::size_t n = clipped_inside.total_size();
    std::vector<float> values(n), grads(n), scaled(n);
    for (std::size_t i = 0; i < n; ++i) {
      values[i] = 0.3f + 0.05f * static_cast<float>(i);
      grads[i] = 0.5f * static_cast<float>(static_cast<int>(i % 5) - 2);
      scaled[i] = factor * grads[i];  // exact
    }
    from_host(clipped_inside.values, values);
    from_host(scaled_before.values, values);
    AdamW inside(clipped_inside, train), before(scaled_before, train);
    Optimizer& through_interface = inside;
    for (int t = 1; t <= 3; ++t) {
      from_host(clipped_inside.grads, grads);
      through_interface.step(clipped_inside, t, 0.01, GradClip{norm_squared.data(), max_norm});
      from_host(scaled_before.grads, scaled);
      before.step(scaled_before, t, 0.01);
      EXPECT_EQ(to_host(clipped_inside.values), to_host(scaled_before.values)) << "step " << t << ", max norm " << max_norm;
    }
    EXPECT_NE(to_host(clipped_inside.values), values);
  }
}

// The bf16 copy of the parameters (ParamStore::keep_bf16_copy), which products read under bf16: filled
// when kept, written by AdamW with each update, and made current again by refresh_bf16_copy().
TEST(AdamW, KeepsTheParametersBf16CopyCurrent) {
  const auto rounded = [](const std::vector<float>& values) {
    std::vector<std::uint16_t> bits;
    for (float value : values) bits.push_back(bf16_bits(value));
    return bits;
  };
  const auto copy_of = [](const ParamStore& params) {
    std::vector<std::uint16_t> bits(params.total_size());
    Kokkos::deep_copy(Kokkos::View<std::uint16_t*, Kokkos::HostSpace>(bits.data(), bits.size()),
                      Kokkos::View<const std::uint16_t*, MemSpace>(params.bf16_copy(), bits.size()));
    return bits;
  };
  ParamStore params = optim_test::weight_and_bias();
  const std::size_t n = params.total_size();
  std::vector<float> values(n), grads(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = 0.3f + 0.0371f * static_cast<float>(i), grads[i] = std::cos(1.7f * i);
  from_host(params.values, values);
  EXPECT_EQ(params.bf16_copy(), nullptr);
  params.keep_bf16_copy();
  EXPECT_EQ(copy_of(params), rounded(values));

  AdamW adamw(params, TrainConfig{});
  from_host(params.grads, grads);
  adamw.step(params, 1, 0.01);
  const std::vector<float> updated = to_host(params.values);
  EXPECT_NE(updated, values);
  EXPECT_EQ(copy_of(params), rounded(updated));

  from_host(params.values, values);
  params.refresh_bf16_copy();
  EXPECT_EQ(copy_of(params), rounded(values));
}

}  // namespace
}  // namespace trident
