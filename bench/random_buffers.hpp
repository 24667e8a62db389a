// What the C++ kernel benchmarks share: device buffers of normal random floats, and the median of
// repeated timings.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/device.hpp"

namespace trident::bench {

inline FloatBuffer filled(std::size_t n, std::uint64_t seed) {
  FloatBuffer buffer("bench", n);
  auto host = Kokkos::create_mirror_view(buffer);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::size_t i = 0; i < n; ++i) host(i) = normal(rng);
  Kokkos::deep_copy(buffer, host);
  return buffer;
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace trident::bench
