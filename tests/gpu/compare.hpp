// Test helpers: how far a GPU kernel's output is from its reference, and outputs that show an
// element left unwritten.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

namespace trident {

// ‖got − want‖ / ‖want‖; infinite where got holds a NaN (an element left unwritten).
inline double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double difference = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i])) return std::numeric_limits<double>::infinity();
    difference += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(difference / norm);
}

inline std::vector<float> poisoned(std::size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

}  // namespace trident
