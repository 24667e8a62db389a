// Global-norm gradient clipping, split into parts so that the data-parallel code can all-reduce
// local sums of squares across ranks before taking the square root (dp/global_grad_norm.hpp):
//   norm = sqrt(sum over ranks of their sums of squares); update with grad_scale = clip_factor(norm, grad_clip).
#pragma once

#include <cstddef>

#include "model/param_store.hpp"

namespace trident {

// Sum of squares of count device floats, accumulated in double.
double sum_of_squares(const float* data, std::size_t count);

// Sum of squares of every gradient element.
double grad_sum_of_squares(const ParamStore& params);

// grad_clip / norm when norm exceeds grad_clip, else 1; grad_clip <= 0 turns clipping off.
double clip_factor(double norm, double grad_clip);

}  // namespace trident
