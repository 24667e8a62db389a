// Device-to-device copies between raw buffers (pipeline messages, stashed inputs), and zeroing one.
#pragma once

#include <cstddef>

namespace trident {

void copy_floats(float* dst, const float* src, std::size_t n);
void copy_ints(int* dst, const int* src, std::size_t n);
void zero_floats(float* dst, std::size_t n);
void zero_doubles(double* dst, std::size_t n);

}  // namespace trident
