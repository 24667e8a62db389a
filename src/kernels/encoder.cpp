#include "kernels/encoder.hpp"

#include "kernels/column_blocks.hpp"
#include "kernels/device.hpp"

namespace trident {

bool tokens_in_range(const int* tokens, long n, int vocab) {
  long invalid = 0;
  Kokkos::parallel_reduce(
      "tokens_in_range", Kokkos::RangePolicy<ExecSpace>(0, n),
      KOKKOS_LAMBDA(long i, long& count) { count += tokens[i] < 0 || tokens[i] >= vocab; }, invalid);
  return invalid == 0;
}

void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C) {
  Kokkos::parallel_for("encoder_forward", Kokkos::RangePolicy<ExecSpace>(0, B * T), KOKKOS_LAMBDA(int bt) {
    const float* token_row = wte + static_cast<long>(tokens[bt]) * C;
    const float* position_row = wpe + static_cast<long>(bt % T) * C;
    float* out_row = out + static_cast<long>(bt) * C;
    for (int c = 0; c < C; ++c) out_row[c] = token_row[c] + position_row[c];
  });
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C) {
  // A token may repeat within the batch, so rows of dwte cannot be split across iterations;
  // columns can.
  for_each_column_block(C, "encoder_backward", KOKKOS_LAMBDA(int first, int end) {
    for (int bt = 0; bt < B * T; ++bt) {
      const float* d = dout + static_cast<long>(bt) * C;
      float* token_grad = dwte + static_cast<long>(tokens[bt]) * C;
      float* position_grad = dwpe + static_cast<long>(bt % T) * C;
      for (int c = first; c < end; ++c) {
        token_grad[c] += d[c];
        position_grad[c] += d[c];
      }
    }
  });
}

}  // namespace trident
