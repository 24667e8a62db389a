#include "kernels/rope.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "kernels/profile.hpp"

namespace trident {

RopeTable::RopeTable(int seq_len, int head_dim, double theta)
    : cos("rope_cos", static_cast<std::size_t>(seq_len) * (head_dim / 2)),
      sin("rope_sin", static_cast<std::size_t>(seq_len) * (head_dim / 2)),
      seq_len(seq_len),
      head_dim(head_dim) {
  const int pairs = head_dim / 2;
  auto host_cos = Kokkos::create_mirror_view(cos);
  auto host_sin = Kokkos::create_mirror_view(sin);
  for (int t = 0; t < seq_len; ++t) {
    for (int i = 0; i < pairs; ++i) {
      const double angle = t * std::pow(theta, -2.0 * i / head_dim);
      host_cos(t * pairs + i) = static_cast<float>(std::cos(angle));
      host_sin(t * pairs + i) = static_cast<float>(std::sin(angle));
    }
  }
  Kokkos::deep_copy(cos, host_cos);
  Kokkos::deep_copy(sin, host_sin);
}

void rope_rotate(float* x, const RopeTable& table, int B, int T, int heads, long ld, int direction,
                 const std::int32_t* positions) {
  const int hd = table.head_dim, pairs = hd / 2;
  const float* cos = table.cos.data();
  const float* sin = table.sin.data();
  const float sign = direction >= 0 ? 1.0f : -1.0f;
  const long n = static_cast<long>(B) * T * heads * pairs;
  declare_kernel_cost(KernelCost::of_floats(2.0 * n + 2.0 * T * pairs, 2.0 * n, 6.0 * n));
  Kokkos::parallel_for(
      "rope_rotate", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(long index) {
        const int i = static_cast<int>(index % pairs);
        const long head_token = index / pairs;
        const int head = static_cast<int>(head_token % heads);
        const long token = head_token / heads;
        const int t = positions ? positions[token] : static_cast<int>(token % T);
        float* pair = x + token * ld + static_cast<long>(head) * hd + i;
        const float c = cos[t * pairs + i], s = sign * sin[t * pairs + i];
        const float first = pair[0], second = pair[pairs];
        pair[0] = first * c - second * s;
        pair[pairs] = second * c + first * s;
      });
}

}  // namespace trident
