// The GPU build's switches between a default that a GPU check verified and a candidate or an
// opt-out (README "On a GPU"): TRIDENT_FLASH_ATTENTION, TRIDENT_FUSED_EPILOGUES, TRIDENT_WARP_ROWS,
// TRIDENT_FLASH_VERSION, TRIDENT_FUSED_NORMS, TRIDENT_FUSED_CROSS_ENTROPY. Callers read one once (a
// function-local static), so a process never mixes the two paths.
#pragma once

#include <cstdlib>
#include <string>

namespace trident {

// Whether the environment variable `name` is set to exactly `value`.
inline bool environment_says(const char* name, const char* value) {
  const char* set = std::getenv(name);
  return set && std::string(set) == value;
}

}  // namespace trident
