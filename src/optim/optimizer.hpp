// What the training loop calls once per step, whatever the optimizer keeps and wherever its state
// lives (every rank: AdamW; sharded across data-parallel ranks: ShardedAdamW in src/dp).
#pragma once

#include "model/param_store.hpp"

namespace trident {

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // Updates params.values from the step's gradients with t = step (1-based) for bias correction.
  // grad_scale multiplies every gradient as it is read (the gradient-clipping factor), which
  // saves a separate pass over the gradients.
  void step(ParamStore& params, int step, double lr, float grad_scale = 1.0f) {
    update(params, step, lr, grad_scale);
  }

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
  virtual void update(ParamStore& params, int step, double lr, float grad_scale) = 0;
};

}  // namespace trident
