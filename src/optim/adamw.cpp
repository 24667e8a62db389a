#include "optim/adamw.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/matmul_precision.hpp"
#include "kernels/row_teams.hpp"
#include "optim/grad_norm.hpp"

namespace trident {

AdamWUpdate::AdamWUpdate(const TrainConfig& train, int step, double lr)
    : beta1_(static_cast<float>(train.beta1)),
      beta2_(static_cast<float>(train.beta2)),
      eps_(static_cast<float>(train.eps)),
      lr_(static_cast<float>(lr)),
      weight_decay_(static_cast<float>(train.weight_decay)),
      m_correction_(static_cast<float>(1.0 / (1.0 - std::pow(train.beta1, step)))),
      v_correction_(static_cast<float>(1.0 / (1.0 - std::pow(train.beta2, step)))) {}

void AdamWUpdate::apply(const ElementRuns& runs, float* param, const float* grad, float* m, float* v,
                        const GradClip& clip, std::uint16_t* param_bf16) const {
  const float beta1 = beta1_, beta2 = beta2_, eps = eps_, rate = lr_, weight_decay = weight_decay_;
  const float m_correction = m_correction_, v_correction = v_correction_;
  const double* norm_squared = clip.norm_squared;
  const double max_norm = clip.max_norm;
  const auto table = runs.device();
  const double n = static_cast<double>(runs.elements());
  declare_kernel_cost(KernelCost::of_floats(4.0 * n, (param_bf16 ? 3.5 : 3.0) * n, 16.0 * n));
  for_each_row("adamw", static_cast<int>(runs.size()), KOKKOS_LAMBDA(const RowTeam& team, int r) {
    const ElementRun run = table(r);
    const float grad_scale = norm_squared ? clip_factor(*norm_squared, max_norm) : 1.0f;
    const float decay = run.decayed ? weight_decay : 0.0f;
    float* p = param + run.param;
    const float* g_in = grad + run.local;
    float* m_run = m + run.local;
    float* v_run = v + run.local;
    std::uint16_t* p_bf16 = param_bf16 ? param_bf16 + run.param : nullptr;
    row_for(team, 0, run.count, [&](int i) {
      const float g = grad_scale * g_in[i];
      m_run[i] = beta1 * m_run[i] + (1.0f - beta1) * g;
      v_run[i] = beta2 * v_run[i] + (1.0f - beta2) * g * g;
      const float m_hat = m_run[i] * m_correction;
      const float v_hat = v_run[i] * v_correction;
      p[i] -= rate * (m_hat / (math::sqrt(v_hat) + eps) + decay * p[i]);
      if (p_bf16) p_bf16[i] = bf16_bits(p[i]);
    });
  });
}

AdamW::AdamW(const ParamStore& params, const TrainConfig& train)
    : m("adamw_m", params.total_size()),
      v("adamw_v", params.total_size()),
      train_(train),
      runs_(whole_tensors(params)) {}

void AdamW::update(ParamStore& params, int step, double lr, const GradClip& clip) {
  if (params.total_size() != m.extent(0)) {
    throw std::logic_error("AdamW::step: " + std::to_string(params.total_size()) +
                           " parameters, but the optimizer state holds " + std::to_string(m.extent(0)));
  }
  AdamWUpdate(train_, step, lr).apply(runs_, params.values.data(), params.grads.data(), m.data(), v.data(), clip,
                                      params.bf16_copy());
}

void AdamW::import_moments(const Moments& moments) {
  Kokkos::deep_copy(m, moments.m);  // nothing to copy when given full_moments() itself
  Kokkos::deep_copy(v, moments.v);
}

}  // namespace trident
