#include "kernels/copy.hpp"

#include <algorithm>
#include <cstdint>

#include "kernels/device.hpp"
#include "kernels/profile.hpp"

namespace trident {

namespace {

struct alignas(16) FourFloats {
  float values[4];
};

// A kernel, not Kokkos::deep_copy: deep_copy without an execution space waits for the device before
// and after, where a kernel is queued behind the work before it and the host goes on.
template <class T>
void copy_elements(const char* label, T* dst, const T* src, std::size_t n) {
  declare_kernel_cost({2.0 * sizeof(T) * n, 0.0});
  Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(std::size_t i) { dst[i] = src[i]; });
}

}  // namespace

void copy_floats(float* dst, const float* src, std::size_t n) { copy_elements("copy_floats", dst, src, n); }
void copy_ints(int* dst, const int* src, std::size_t n) { copy_elements("copy_ints", dst, src, n); }
void copy_bf16(std::uint16_t* dst, const std::uint16_t* src, std::size_t n) { copy_elements("copy_bf16", dst, src, n); }
// Four floats a thread, stored 16 bytes at a time from the first 16-byte boundary: zeroing the
// gradients a float a thread ran at 840 GB/s on an H200 (2026-11-28), a fifth of its bandwidth.
void zero_floats(float* dst, std::size_t n) {
  declare_kernel_cost(KernelCost::of_floats(0.0, static_cast<double>(n)));
  const std::size_t misaligned = reinterpret_cast<std::uintptr_t>(dst) / sizeof(float) % 4;
  const std::size_t head = std::min(n, misaligned == 0 ? 0 : 4 - misaligned), quads = (n - head) / 4;
  const std::size_t tail_start = head + 4 * quads, singles = n - 4 * quads;
  Kokkos::parallel_for("zero_floats", Kokkos::RangePolicy<ExecSpace>(0, quads + singles), KOKKOS_LAMBDA(std::size_t i) {
    if (i < quads)
      reinterpret_cast<FourFloats*>(dst + head)[i] = FourFloats{};
    else if (i - quads < head)
      dst[i - quads] = 0.0f;
    else
      dst[tail_start + (i - quads - head)] = 0.0f;
  });
}
void copy_columns(float* dst, long dst_ld, const float* src, long src_ld, long rows, int width) {
  const long n = rows * width;
  declare_kernel_cost(KernelCost::of_floats(static_cast<double>(n), static_cast<double>(n)));
  Kokkos::parallel_for(
      "copy_columns", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(long i) {
        const long row = i / width, column = i % width;
        dst[row * dst_ld + column] = src[row * src_ld + column];
      });
}
void zero_columns(float* dst, long dst_ld, long rows, int width) {
  const long n = rows * width;
  declare_kernel_cost(KernelCost::of_floats(0.0, static_cast<double>(n)));
  Kokkos::parallel_for(
      "zero_columns", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(long i) {
        dst[(i / width) * dst_ld + i % width] = 0.0f;
      });
}
void zero_doubles(double* dst, std::size_t n) {
  declare_kernel_cost({8.0 * n, 0.0});
  Kokkos::parallel_for("zero_doubles", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(std::size_t i) { dst[i] = 0.0; });
}

}  // namespace trident
