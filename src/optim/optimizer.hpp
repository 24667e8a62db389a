// What the training loop calls once per step, whatever the optimizer keeps and wherever its state
// lives (every rank: AdamW; sharded across data-parallel ranks: ShardedAdamW in src/dp).
#pragma once

#include "model/param_store.hpp"

namespace trident {

// The global-norm clip: every gradient is multiplied, as the optimizer reads it, by
// clip_factor(*norm_squared, max_norm) (optim/grad_norm.hpp), which its kernel computes from the
// squared norm a reduction left in device memory: the host never waits for the norm. No norm (null)
// leaves the gradients as they are.
struct GradClip {
  const double* norm_squared = nullptr;  // device memory, one double
  double max_norm = 0.0;                 // train.grad_clip; <= 0: no clipping
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // Updates params.values from the step's gradients with t = step (1-based) for bias correction,
  // the gradients clipped as they are read (a separate pass over them saved).
  void step(ParamStore& params, int step, double lr, const GradClip& clip = {}) { update(params, step, lr, clip); }

  // The AdamW moments in the layout of params.values, for checkpoints: the optimizer's own
  // buffers (changing them changes the optimizer), or under ZeRO-1 gathered copies (collective
  // over the data-parallel group: every rank gets all of them).
  struct Moments {
    FloatBuffer m, v;
  };
  virtual Moments full_moments() = 0;
  // Sets the moments from buffers in that layout (a sharded optimizer keeps the pieces it owns).
  virtual void import_moments(const Moments& moments) = 0;

 private:
  virtual void update(ParamStore& params, int step, double lr, const GradClip& clip) = 0;
};

}  // namespace trident
