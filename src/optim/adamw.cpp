#include "optim/adamw.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace trident {

AdamWUpdate::AdamWUpdate(const TrainConfig& train, int step, double lr, float grad_scale)
    : beta1_(static_cast<float>(train.beta1)),
      beta2_(static_cast<float>(train.beta2)),
      eps_(static_cast<float>(train.eps)),
      lr_(static_cast<float>(lr)),
      weight_decay_(static_cast<float>(train.weight_decay)),
      m_correction_(static_cast<float>(1.0 / (1.0 - std::pow(train.beta1, step)))),
      v_correction_(static_cast<float>(1.0 / (1.0 - std::pow(train.beta2, step)))),
      grad_scale_(grad_scale) {}

void AdamWUpdate::apply(float* param, const float* grad, float* m, float* v, std::size_t count,
                        bool decayed) const {
  const float beta1 = beta1_, beta2 = beta2_, eps = eps_, rate = lr_;
  const float m_correction = m_correction_, v_correction = v_correction_, grad_scale = grad_scale_;
  const float decay = decayed ? weight_decay_ : 0.0f;
  Kokkos::parallel_for(
      "adamw", Kokkos::RangePolicy<ExecSpace>(0, count), KOKKOS_LAMBDA(const std::size_t i) {
        const float g = grad_scale * grad[i];
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        const float m_hat = m[i] * m_correction;
        const float v_hat = v[i] * v_correction;
        param[i] -= rate * (m_hat / (std::sqrt(v_hat) + eps) + decay * param[i]);
      });
}

AdamW::AdamW(const ParamStore& params, const TrainConfig& train)
    : m("adamw_m", params.total_size()), v("adamw_v", params.total_size()), train_(train) {}

void AdamW::update(ParamStore& params, int step, double lr, float grad_scale) {
  if (params.total_size() != m.extent(0)) {
    throw std::logic_error("AdamW::step: " + std::to_string(params.total_size()) +
                           " parameters, but the optimizer state holds " + std::to_string(m.extent(0)));
  }
  const AdamWUpdate adamw(train_, step, lr, grad_scale);
  for (const ParamTensor& tensor : params.tensors())
    adamw.apply(tensor.in(params.values), tensor.in(params.grads), tensor.in(m), tensor.in(v), tensor.size,
                tensor.weight_decay);
}

void AdamW::import_moments(const Moments& moments) {
  Kokkos::deep_copy(m, moments.m);  // nothing to copy when given full_moments() itself
  Kokkos::deep_copy(v, moments.v);
}

}  // namespace trident
