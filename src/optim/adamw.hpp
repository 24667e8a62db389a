// AdamW (Loshchilov & Hutter) with bias correction and decoupled weight decay on the tensors
// marked weight_decay (2-D weights only), as llm.c and GPT-2 training do.
#pragma once

#include <cstddef>
#include <cstdint>

#include "deck/config.hpp"
#include "kernels/device.hpp"
#include "model/param_store.hpp"
#include "optim/element_runs.hpp"
#include "optim/optimizer.hpp"

namespace trident {

// The constants of one AdamW step; apply() is the update, one kernel launch over every run of
// elements, shared by the replicated optimizer (whole tensors) and the sharded one (the pieces of
// tensors a rank owns).
class AdamWUpdate {
 public:
  AdamWUpdate(const TrainConfig& train, int step, double lr);

  // For each run and i < run.count, with p = param[run.param + i], g = s · grad[run.local + i]
  // (s the clip factor of `clip`), m and v at run.local + i, and wd = weight_decay if run.decayed,
  // else 0:
  //   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
  //   m^ = m / (1 - b1^t);   v^ = v / (1 - b2^t)
  //   p -= lr (m^ / (sqrt(v^) + eps) + wd p)
  // and, where `param_bf16` is given (the store's bf16 copy, ParamStore::keep_bf16_copy), writes the
  // new p there rounded to bf16.
  void apply(const ElementRuns& runs, float* param, const float* grad, float* m, float* v, const GradClip& clip,
             std::uint16_t* param_bf16 = nullptr) const;

 private:
  float beta1_, beta2_, eps_, lr_, weight_decay_, m_correction_, v_correction_;
};

class AdamW final : public Optimizer {
 public:
  // Zeroed moment buffers in the layout of params.values; hyper-parameters from `train`.
  AdamW(const ParamStore& params, const TrainConfig& train);

  FloatBuffer m;  // first moments
  FloatBuffer v;  // second moments

  Moments full_moments() override { return {m, v}; }
  void import_moments(const Moments& moments) override;

 private:
  // Every tensor from params.grads.
  void update(ParamStore& params, int step, double lr, const GradClip& clip) override;

  TrainConfig train_;
  ElementRuns runs_;  // the store's tensors, whole
};

}  // namespace trident
