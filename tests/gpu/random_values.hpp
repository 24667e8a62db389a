// Test helper: n values drawn uniformly from [-scale, scale], the same for the same seed.
#pragma once

#include <random>
#include <vector>

namespace trident {

inline std::vector<float> random_values(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace trident
