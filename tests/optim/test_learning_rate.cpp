// Learning-rate schedule at the points that pin it down: warmup, its end, the middle, the end.
#include <gtest/gtest.h>

#include "optim/learning_rate.hpp"

namespace trident {
namespace {

TrainConfig schedule(LrDecay decay, int warmup) {
  TrainConfig train;
  train.lr = 1e-3;
  train.min_lr = 1e-4;
  train.warmup_steps = warmup;
  train.steps = 110;
  train.decay = decay;
  return train;
}

TEST(LearningRate, WarmupRisesLinearlyToLr) {
  for (LrDecay decay : {LrDecay::cosine, LrDecay::linear, LrDecay::constant}) {
    const TrainConfig train = schedule(decay, 10);
    EXPECT_DOUBLE_EQ(learning_rate(1, train), 1e-4);
    EXPECT_DOUBLE_EQ(learning_rate(5, train), 5e-4);
    EXPECT_DOUBLE_EQ(learning_rate(10, train), 1e-3);
  }
}

TEST(LearningRate, CosineDecaysToMinLrOnTheLastStep) {
  const TrainConfig train = schedule(LrDecay::cosine, 10);
  EXPECT_DOUBLE_EQ(learning_rate(35, train), 1e-4 + 9e-4 * 0.8535533905932737);  // (1 + cos(pi/4)) / 2
  EXPECT_DOUBLE_EQ(learning_rate(60, train), 5.5e-4);
  EXPECT_DOUBLE_EQ(learning_rate(110, train), 1e-4);
}

TEST(LearningRate, LinearDecaysToMinLrOnTheLastStep) {
  const TrainConfig train = schedule(LrDecay::linear, 10);
  EXPECT_DOUBLE_EQ(learning_rate(35, train), 7.75e-4);
  EXPECT_DOUBLE_EQ(learning_rate(60, train), 5.5e-4);
  EXPECT_DOUBLE_EQ(learning_rate(110, train), 1e-4);
}

TEST(LearningRate, ConstantStaysAtLr) {
  const TrainConfig train = schedule(LrDecay::constant, 10);
  EXPECT_DOUBLE_EQ(learning_rate(11, train), 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate(60, train), 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate(110, train), 1e-3);
}

TEST(LearningRate, WithoutWarmupDecayStartsAtStepOne) {
  const TrainConfig train = schedule(LrDecay::linear, 0);
  EXPECT_DOUBLE_EQ(learning_rate(1, train), 1e-3 - 9e-4 / 110);
  EXPECT_DOUBLE_EQ(learning_rate(110, train), 1e-4);
}

TEST(LearningRate, StepsPastTheEndStayAtMinLr) {
  EXPECT_DOUBLE_EQ(learning_rate(200, schedule(LrDecay::cosine, 10)), 1e-4);
}

}  // namespace
}  // namespace trident
