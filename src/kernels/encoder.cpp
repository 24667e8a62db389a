#include "kernels/encoder.hpp"

#include "kernels/column_sums.hpp"
#include "kernels/device.hpp"
#include "kernels/row_teams.hpp"

namespace trident {

namespace {

// Row of wte (or of its gradient) holding `token`, or null when the token is outside the rows held.
template <class Float>
KOKKOS_INLINE_FUNCTION Float* token_row(Float* wte, int token, int vocab_first, int vocab_rows, int C) {
  const int row = token - vocab_first;
  return row >= 0 && row < vocab_rows ? wte + static_cast<long>(row) * C : nullptr;
}

// Token bt's row of the position table: its position id, or t.
KOKKOS_INLINE_FUNCTION int position_of(int bt, int T, const std::int32_t* positions) {
  return positions ? positions[bt] : bt % T;
}

}  // namespace

void encoder_forward(float* out, const int* tokens, const float* wte, int vocab_first, int vocab_rows,
                     const float* wpe, int B, int T, int C, const std::int32_t* positions) {
  const double rows = static_cast<double>(B) * T;
  declare_kernel_cost(KernelCost::of_floats(rows * (1 + C * (wpe ? 2 : 1)), rows * C, wpe ? rows * C : 0.0));
  for_each_row("encoder_forward", B * T, KOKKOS_LAMBDA(const RowTeam& team, int bt) {
    const float* token = token_row(wte, tokens[bt], vocab_first, vocab_rows, C);
    const float* position = wpe ? wpe + static_cast<long>(position_of(bt, T, positions)) * C : nullptr;
    float* out_row = out + static_cast<long>(bt) * C;
    row_for(team, 0, C, [&](int c) { out_row[c] = (token ? token[c] : 0.0f) + (position ? position[c] : 0.0f); });
  });
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int vocab_first,
                      int vocab_rows, int B, int T, int C, const std::int32_t* positions) {
  // A token may repeat within the batch: its rows of dout all add into one row of dwte.
  const double rows = static_cast<double>(B) * T, sums = dwpe ? 2.0 : 1.0;
  declare_kernel_cost(KernelCost::of_floats(rows * (C + 1) + sums * rows * C, sums * rows * C, sums * rows * C));
  add_rows_into<2>(
      "encoder_backward", B * T, C,
      KOKKOS_LAMBDA(int bt) {
        return Destinations<2>{token_row(dwte, tokens[bt], vocab_first, vocab_rows, C),
                               dwpe ? dwpe + static_cast<long>(position_of(bt, T, positions)) * C : nullptr};
      },
      KOKKOS_LAMBDA(int bt, int c) {
        const float d = dout[static_cast<long>(bt) * C + c];
        return Terms<2>{d, d};
      });
}

}  // namespace trident
