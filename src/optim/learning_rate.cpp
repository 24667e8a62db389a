#include "optim/learning_rate.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace trident {

double learning_rate(int step, const TrainConfig& train) {
  const int warmup = train.warmup_steps;
  if (warmup > 0 && step <= warmup) return train.lr * step / warmup;
  const double progress = std::min(1.0, static_cast<double>(step - warmup) / std::max(1, train.steps - warmup));
  switch (train.decay) {
    case LrDecay::cosine:
      return train.min_lr + (train.lr - train.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    case LrDecay::linear:
      return train.lr - (train.lr - train.min_lr) * progress;
    case LrDecay::constant:
      return train.lr;
  }
  return train.lr;
}

}  // namespace trident
