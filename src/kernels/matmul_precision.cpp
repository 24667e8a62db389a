#include "kernels/matmul_precision.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace trident {

namespace {

#ifdef KOKKOS_ENABLE_CUDA
constexpr MatmulPrecision kAutomatic = MatmulPrecision::tf32;
#else
constexpr MatmulPrecision kAutomatic = MatmulPrecision::fp32;
#endif

MatmulPrecision g_precision = kAutomatic;

}  // namespace

template <class T>
T* operand_scratch(int slot, long n) {
  using Buffer = Kokkos::View<T*, MemSpace>;
  static std::array<Buffer, 2>* buffers = nullptr;  // freed before Kokkos finalises (Views must not outlive it)
  if (!buffers) {
    buffers = new std::array<Buffer, 2>();
    Kokkos::push_finalize_hook([] {
      delete buffers;
      buffers = nullptr;
    });
  }
  Buffer& buffer = (*buffers)[slot];
  if (static_cast<long>(buffer.extent(0)) < n)
    buffer = Buffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("operand_scratch")), n);
  return buffer.data();
}
template float* operand_scratch<float>(int, long);
template std::uint16_t* operand_scratch<std::uint16_t>(int, long);

void set_matmul_precision(MatmulPrecision precision) {
  g_precision = precision == MatmulPrecision::automatic ? kAutomatic : precision;
}

MatmulPrecision matmul_precision() { return g_precision; }

const char* matmul_precision_name(MatmulPrecision precision) {
  switch (precision) {
    case MatmulPrecision::automatic: return "auto";
    case MatmulPrecision::fp32: return "fp32";
    case MatmulPrecision::tf32: return "tf32";
    case MatmulPrecision::bf16: return "bf16";
  }
  return "?";
}

int dropped_significand_bits(MatmulPrecision precision) {
  switch (precision) {
    case MatmulPrecision::tf32: return 13;
    case MatmulPrecision::bf16: return 16;
    default: return 0;
  }
}

long operand_extent(int rows, int columns, int ld, int batches, long stride) {
  return static_cast<long>(batches - 1) * stride + static_cast<long>(rows - 1) * ld + columns;
}

const float* rounded_operand(int slot, const float* x, long n) {
  float* out = operand_scratch<float>(slot, n);
  const int dropped = dropped_significand_bits(g_precision);
  Kokkos::parallel_for("round_operand", Kokkos::RangePolicy<ExecSpace>(0, n),
                       KOKKOS_LAMBDA(long i) { out[i] = round_significand(x[i], dropped); });
  return out;
}

}  // namespace trident
