#pragma once

#include "deck/config.hpp"

namespace trident {

// Learning rate of `step` (1-based). With W = warmup_steps, S = steps, lr and min_lr from `train`:
//   s <= W:  lr * s / W                                   (linear warmup, reaches lr at s = W)
//   s >  W:  p = min(1, (s - W) / (S - W)), then
//            cosine:   min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2
//            linear:   lr - (lr - min_lr) * p
//            constant: lr
// so the schedule is continuous at s = W (p = 0 there) and ends at min_lr on the last step.
double learning_rate(int step, const TrainConfig& train);

}  // namespace trident
