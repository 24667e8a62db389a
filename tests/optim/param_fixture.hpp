// A small ParamStore with one decayed 2-D weight and one undecayed 1-D bias, and host access.
#pragma once

#include <vector>

#include "model/param_store.hpp"

namespace trident::optim_test {

inline ParamStore weight_and_bias() {
  ParamStore params;
  params.add("h.0.mlp.c_fc.weight", {3, 4});
  params.add("h.0.mlp.c_fc.bias", {4});
  params.allocate();
  return params;
}

inline std::vector<float> to_host(const FloatBuffer& buffer) {
  auto mirror = Kokkos::create_mirror_view(buffer);
  Kokkos::deep_copy(mirror, buffer);
  return std::vector<float>(mirror.data(), mirror.data() + mirror.extent(0));
}

inline void from_host(const FloatBuffer& buffer, const std::vector<float>& values) {
  auto mirror = Kokkos::create_mirror_view(buffer);
  for (std::size_t i = 0; i < values.size(); ++i) mirror(i) = values[i];
  Kokkos::deep_copy(buffer, mirror);
}

}  // namespace trident::optim_test
