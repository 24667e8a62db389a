// Global-norm gradient clipping, split into parts so that later issues can all-reduce the
// local sum of squares across ranks before taking the square root:
//   norm = sqrt(sum over ranks of grad_sum_of_squares); grads *= clip_factor(norm, grad_clip).
#pragma once

#include "model/param_store.hpp"

namespace trident {

// Sum of squares of every gradient element, accumulated in double.
double grad_sum_of_squares(const ParamStore& params);

void scale_grads(ParamStore& params, float factor);

// grad_clip / norm when norm exceeds grad_clip, else 1; grad_clip <= 0 turns clipping off.
double clip_factor(double norm, double grad_clip);

}  // namespace trident
