#include <algorithm>
#include <chrono>

#include "kernels/device.hpp"
#include "kernels/gemm.hpp"
#include "kernels/profile.hpp"

namespace trident {

double measure_gemm_peak_gflops(MatmulPrecision precision) {
  GemmContext context(precision);
  using Clock = std::chrono::steady_clock;
  constexpr int largest = 2048;
  constexpr double time_box_s = 1.0;  // stop early on a slow machine; the best so far still counts
  FloatBuffer a("peak_a", largest * largest), b("peak_b", largest * largest), c("peak_c", largest * largest);
  Kokkos::deep_copy(a, 0.5f);
  Kokkos::deep_copy(b, 0.25f);

  const auto start = Clock::now();
  double best = 0.0;
  for (int n : {1024, 1536, 2048}) {
    for (int rep = 0; rep < 3; ++rep) {  // the first run of a size warms up threads and caches
      const auto t0 = Clock::now();
      gemm(context, false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
      wait_for_device("sgemm peak");
      const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      if (rep > 0) best = std::max(best, 2.0 * n * n * n / seconds * 1e-9);
      if (std::chrono::duration<double>(Clock::now() - start).count() > time_box_s && best > 0.0)
        return best;
    }
  }
  return best;
}

}  // namespace trident
