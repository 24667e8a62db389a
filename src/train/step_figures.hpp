// What a training step leaves on the device for its record, summed over the grid there: the loss
// sum and the squared gradient norm (the optimizer's clip reads the norm where it lies), and under
// [model.moe] the load-balancing loss's sum and each layer's tokens per expert. The host reads them
// all at the step's end, in one copy: the step's one wait for the device besides the timeline's.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/device.hpp"

namespace trident {

class StepFigures {
 public:
  // mixture_counts: layers · experts of [model.moe] (0 for a dense model). A separate host copy even
  // where host = device, so that the read is a copy wherever it runs.
  explicit StepFigures(std::size_t mixture_counts = 0)
      : values_("step_figures", kFirstCount + mixture_counts), host_(Kokkos::create_mirror(values_)) {}

  double* loss_sum() const { return values_.data(); }
  double* grad_norm_squared() const { return values_.data() + 1; }
  // The mixture's figures, contiguous (one reduction): the aux loss's sum, then tokens per expert.
  double* mixture() const { return values_.data() + 2; }
  std::size_t mixture_size() const { return values_.extent(0) - 2; }

  struct Read {
    double loss_sum, grad_norm_squared, aux_loss_sum;
    std::vector<double> tokens_per_expert;  // [layers, experts]

    // The busiest expert's tokens over the mean, in the layer where that is largest (1: balanced;
    // 0: no mixture).
    double expert_load(int experts) const {
      double worst = 0.0;
      for (std::size_t first = 0; experts > 0 && first < tokens_per_expert.size(); first += experts) {
        const auto layer = tokens_per_expert.begin() + static_cast<long>(first);
        double total = 0.0;
        for (int e = 0; e < experts; ++e) total += layer[e];
        if (total > 0) worst = std::max(worst, *std::max_element(layer, layer + experts) * experts / total);
      }
      return worst;
    }
  };
  Read read() const {
    Kokkos::deep_copy(host_, values_);
    return {host_(0), host_(1), host_(2), std::vector<double>(host_.data() + kFirstCount, host_.data() + host_.size())};
  }

 private:
  static constexpr std::size_t kFirstCount = 3;  // loss, norm, aux loss
  Kokkos::View<double*, MemSpace> values_;
  Kokkos::View<double*, MemSpace>::HostMirror host_;
};

}  // namespace trident
