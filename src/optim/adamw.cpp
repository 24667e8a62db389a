#include "optim/adamw.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace trident {

AdamW::AdamW(const ParamStore& params, const TrainConfig& train)
    : m("adamw_m", params.total_size()),
      v("adamw_v", params.total_size()),
      beta1_(train.beta1),
      beta2_(train.beta2),
      eps_(train.eps),
      weight_decay_(train.weight_decay) {}

void AdamW::step(ParamStore& params, int step, double lr) {
  if (params.total_size() != m.extent(0)) {
    throw std::logic_error("AdamW::step: " + std::to_string(params.total_size()) +
                           " parameters, but the optimizer state holds " + std::to_string(m.extent(0)));
  }
  const float beta1 = static_cast<float>(beta1_);
  const float beta2 = static_cast<float>(beta2_);
  const float eps = static_cast<float>(eps_);
  const float rate = static_cast<float>(lr);
  const float m_correction = static_cast<float>(1.0 / (1.0 - std::pow(beta1_, step)));
  const float v_correction = static_cast<float>(1.0 / (1.0 - std::pow(beta2_, step)));

  for (const ParamTensor& tensor : params.tensors()) {
    float* p = tensor.in(params.values);
    const float* g = tensor.in(params.grads);
    float* m1 = tensor.in(m);
    float* m2 = tensor.in(v);
    const float decay = tensor.weight_decay ? static_cast<float>(weight_decay_) : 0.0f;
    Kokkos::parallel_for(
        "adamw", Kokkos::RangePolicy<ExecSpace>(0, tensor.size), KOKKOS_LAMBDA(const std::size_t i) {
          m1[i] = beta1 * m1[i] + (1.0f - beta1) * g[i];
          m2[i] = beta2 * m2[i] + (1.0f - beta2) * g[i] * g[i];
          const float m_hat = m1[i] * m_correction;
          const float v_hat = m2[i] * v_correction;
          p[i] -= rate * (m_hat / (std::sqrt(v_hat) + eps) + decay * p[i]);
        });
  }
}

}  // namespace trident
