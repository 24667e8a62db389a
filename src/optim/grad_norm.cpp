#include "optim/grad_norm.hpp"

#include "kernels/row_teams.hpp"

namespace trident {

// Blocks of kBlock floats summed in fp32 (vectorised lanes on the CPU, a team per block on the
// GPU), the blocks' sums in fp64: one element at a time in fp64 is a chain of dependent adds that
// ran at a tenth of the memory bandwidth, and 4096 squares lose nothing that matters to a norm.
double sum_of_squares(const float* data, std::size_t count) {
  constexpr std::size_t kBlock = 4096;
  const auto blocks = static_cast<int>((count + kBlock - 1) / kBlock);
  return sum_over_rows(
      "sum_of_squares", blocks, KOKKOS_LAMBDA(const RowTeam& team, int block) {
        const float* x = data + block * kBlock;
        const int n = static_cast<int>(count - block * kBlock < kBlock ? count - block * kBlock : kBlock);
        return static_cast<double>(row_sum(team, n, [&](int i) { return x[i] * x[i]; }));
      });
}

double grad_sum_of_squares(const ParamStore& params) {
  return sum_of_squares(params.grads.data(), params.total_size());
}

double clip_factor(double norm, double grad_clip) {
  return grad_clip > 0.0 && norm > grad_clip ? grad_clip / norm : 1.0;
}

}  // namespace trident
