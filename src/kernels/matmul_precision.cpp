#include "kernels/matmul_precision.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/gemm.hpp"
#include "kernels/profile.hpp"

namespace trident {

MatmulPrecision resolve_matmul_precision(MatmulPrecision precision) {
  if (precision != MatmulPrecision::automatic) return precision;
#ifdef KOKKOS_ENABLE_CUDA
  return MatmulPrecision::tf32;
#else
  return MatmulPrecision::fp32;
#endif
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

namespace {

template <class View>
typename View::value_type* at_least(View& buffer, long n) {
  if (static_cast<long>(buffer.extent(0)) < n)
    buffer = View(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("operand_scratch")), n);
  return buffer.data();
}

}  // namespace

RoundedOnce::RoundedOnce(GemmContext& context, const float* x, long n) : context_(context) {
  if (context.precision() != MatmulPrecision::bf16 || n == 0) return;
  if (context.rounded_once_.bits) throw std::logic_error("RoundedOnce: a second one while the first lives");
  const ProfileRegion product(kProductRegion);
  context.rounded_once_ = {x, bf16_copy_in_scratch(context, 2, x, n), static_cast<std::size_t>(n)};
}

float* OperandScratch::floats(int slot, long n) { return at_least(floats_[slot], n); }

std::uint16_t* OperandScratch::halves(int slot, long n) { return at_least(halves_[slot], n); }

const float* OperandScratch::rounded(int slot, const float* x, long n, int dropped) {
  float* out = floats(slot, n);
  declare_kernel_cost(KernelCost::of_floats(n, n, n));
  Kokkos::parallel_for("round_operand", Kokkos::RangePolicy<ExecSpace>(0, n),
                       KOKKOS_LAMBDA(long i) { out[i] = round_significand(x[i], dropped); });
  return out;
}

const float* OperandScratch::widened(int slot, const std::uint16_t* bits, long n) {
  float* out = floats(slot, n);
  declare_kernel_cost(KernelCost::of_floats(0.5 * n, n));
  Kokkos::parallel_for("widen_bf16_operand", Kokkos::RangePolicy<ExecSpace>(0, n),
                       KOKKOS_LAMBDA(long i) { out[i] = bf16_value(bits[i]); });
  return out;
}

const std::uint16_t* Bf16Copy::of(const float* x, long extent) const {
  const auto at = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  if (!bits || at(x) < at(values) || at(x + extent) > at(values + size)) return nullptr;
  return bits + (x - values);
}

}  // namespace trident
