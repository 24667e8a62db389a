// The gradient sum of squares over element runs, and the clip factor.
#include <gtest/gtest.h>

#include <cmath>

#include "optim/grad_norm.hpp"
#include "param_fixture.hpp"

namespace trident {
namespace {

using optim_test::from_host;
using optim_test::to_host;

double device_sum_of_squares(const ElementRuns& runs, const float* data) {
  Kokkos::View<double, MemSpace> total("total");
  Kokkos::deep_copy(total, -1.0);  // overwritten, not added to
  sum_of_squares(total.data(), runs, data);
  double result = 0.0;
  Kokkos::deep_copy(result, total);
  return result;
}

TEST(GradNorm, SumOfSquaresCoversEveryTensor) {
  ParamStore params = optim_test::weight_and_bias();
  std::vector<float> grads(params.total_size());
  double expected = 0;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    grads[i] = 0.25f * static_cast<float>(static_cast<int>(i) - 7);  // exact in float
    expected += static_cast<double>(grads[i]) * grads[i];
  }
  from_host(params.grads, grads);
  EXPECT_DOUBLE_EQ(device_sum_of_squares(whole_tensors(params), params.grads.data()), expected);
}

// Runs read their elements at `local`: pieces of tensors held elsewhere (ZeRO-1's shard).
TEST(GradNorm, SumOfSquaresOfPiecesHeldAtTheirLocalPlaces) {
  ParamStore params = optim_test::weight_and_bias();
  const std::vector<float> shard = {100.0f, 1.0f, -2.0f, 3.0f, 100.0f};
  FloatBuffer buffer("shard", shard.size());
  from_host(buffer, shard);
  ElementRuns runs;
  runs.add(params.find("h.0.mlp.c_fc.weight"), 4, 2, 1);  // shard[1, 3)
  runs.add(params.find("h.0.mlp.c_fc.bias"), 12, 1, 3);   // shard[3]
  runs.upload();
  EXPECT_EQ(device_sum_of_squares(runs, buffer.data()), 14.0);
  ElementRuns none;
  none.upload();
  EXPECT_EQ(device_sum_of_squares(none, buffer.data()), 0.0);
}

TEST(GradNorm, SumOfSquaresAccumulatesInDouble) {
  ParamStore params;
  params.add("wte.weight", {1 << 12, 1 << 12});  // 16.7M elements: a float sum would stall at 2^24
  params.allocate();
  Kokkos::deep_copy(params.grads, 1.0f);
  EXPECT_EQ(device_sum_of_squares(whole_tensors(params), params.grads.data()), static_cast<double>(1 << 24));
}

// Runs are cut from each piece's start, at most kRunElements long, and carry their tensor's decay.
TEST(GradNorm, RunsStayWithinTheirTensor) {
  ParamStore params;
  params.add("h.0.mlp.c_fc.weight", {2, kRunElements + 1});  // 2 kRunElements + 2: three runs
  params.add("h.0.mlp.c_fc.bias", {3});
  params.allocate();
  const ElementRuns runs = whole_tensors(params);
  ASSERT_EQ(runs.size(), 4u);
  const std::vector<ElementRun>& host = runs.host();
  EXPECT_EQ(host[0].count, kRunElements);
  EXPECT_EQ(host[1].param, static_cast<std::size_t>(kRunElements));
  EXPECT_EQ(host[2].count, 2);
  EXPECT_EQ(host[3].param, params.find("h.0.mlp.c_fc.bias").offset);
  EXPECT_EQ(host[3].count, 3);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(host[r].decayed, 1) << r;
  EXPECT_EQ(host[3].decayed, 0);
}

TEST(GradNorm, ClipFactorOnlyShrinksNormsAboveTheLimit) {
  EXPECT_FLOAT_EQ(clip_factor(16.0, 1.0), 0.25f);
  EXPECT_FLOAT_EQ(clip_factor(1.0, 1.0), 1.0f);
  EXPECT_FLOAT_EQ(clip_factor(0.25, 1.0), 1.0f);
  EXPECT_FLOAT_EQ(clip_factor(1e12, 0.0), 1.0f);  // 0 = clipping off
  EXPECT_EQ(clip_factor(9.0, 1.0), static_cast<float>(1.0 / 3.0));  // the quotient in fp64, rounded once
}

}  // namespace
}  // namespace trident
