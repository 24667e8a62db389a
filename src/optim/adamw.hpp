// AdamW (Loshchilov & Hutter) with bias correction and decoupled weight decay on the tensors
// marked weight_decay (2-D weights only), as llm.c and GPT-2 training do.
#pragma once

#include "deck/config.hpp"
#include "kernels/device.hpp"
#include "model/param_store.hpp"

namespace trident {

class AdamW {
 public:
  // Zeroed moment buffers in the layout of params.values; hyper-parameters from `train`.
  AdamW(const ParamStore& params, const TrainConfig& train);

  // One update of every parameter from params.grads, with t = step (1-based) for bias correction:
  //   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
  //   m^ = m / (1 - b1^t);   v^ = v / (1 - b2^t)
  //   p -= lr (m^ / (sqrt(v^) + eps) + wd p),  wd = weight_decay on decayed tensors, else 0
  void step(ParamStore& params, int step, double lr);

  FloatBuffer m;  // first moments
  FloatBuffer v;  // second moments

 private:
  double beta1_, beta2_, eps_, weight_decay_;
};

}  // namespace trident
