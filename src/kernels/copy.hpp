// Device-to-device copies between raw buffers (pipeline messages, stashed inputs, a group of one
// rank's gathers), and zeroing one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace trident {

void copy_floats(float* dst, const float* src, std::size_t n);
void copy_ints(int* dst, const int* src, std::size_t n);
void copy_bf16(std::uint16_t* dst, const std::uint16_t* src, std::size_t n);  // bf16 bits
void zero_floats(float* dst, std::size_t n);
// `width` floats of each of `rows` rows, src_ld and dst_ld floats apart (packing columns of a
// wider tensor into a message, and back).
void copy_columns(float* dst, long dst_ld, const float* src, long src_ld, long rows, int width);
void zero_columns(float* dst, long dst_ld, long rows, int width);
void zero_doubles(double* dst, std::size_t n);

}  // namespace trident
