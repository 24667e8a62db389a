// What a training step leaves on the device for its record, summed over the grid there: the loss
// sum and the squared gradient norm (the optimizer's clip reads the norm where it lies). The host
// reads both at the step's end, in one copy: the step's one wait for the device besides the
// timeline's.
#pragma once

#include "kernels/device.hpp"

namespace trident {

class StepFigures {
 public:
  // A separate host copy even where host = device, so that the read is a copy wherever it runs.
  StepFigures() : values_("step_figures"), host_(Kokkos::create_mirror(values_)) {}

  double* loss_sum() const { return values_.data(); }
  double* grad_norm_squared() const { return values_.data() + 1; }

  struct Read {
    double loss_sum, grad_norm_squared;
  };
  Read read() const {
    Kokkos::deep_copy(host_, values_);
    return {host_(0), host_(1)};
  }

 private:
  Kokkos::View<double[2], MemSpace> values_;
  Kokkos::View<double[2], MemSpace>::HostMirror host_;
};

}  // namespace trident
