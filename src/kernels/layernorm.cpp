#include "kernels/layernorm.hpp"

#include "kernels/column_blocks.hpp"
#include "kernels/device.hpp"
#include "kernels/math.hpp"

namespace trident {

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight,
                       const float* bias, int rows, int C) {
  Kokkos::parallel_for("layernorm_forward", Kokkos::RangePolicy<ExecSpace>(0, rows), KOKKOS_LAMBDA(int r) {
    const float* x_row = x + static_cast<long>(r) * C;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < C; ++c) sum += x_row[c];
    const float m = sum / C;
    float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
    for (int c = 0; c < C; ++c) squares += (x_row[c] - m) * (x_row[c] - m);
    const float s = 1.0f / math::sqrt(squares / C + kLayerNormEps);
    float* out_row = out + static_cast<long>(r) * C;
    for (int c = 0; c < C; ++c) out_row[c] = (x_row[c] - m) * s * weight[c] + bias[c];
    mean[r] = m;
    rstd[r] = s;
  });
}

void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* mean, const float* rstd, const float* weight, int rows, int C) {
  Kokkos::parallel_for("layernorm_backward_input", Kokkos::RangePolicy<ExecSpace>(0, rows), KOKKOS_LAMBDA(int r) {
    const float* x_row = x + static_cast<long>(r) * C;
    const float* dout_row = dout + static_cast<long>(r) * C;
    const float m = mean[r], s = rstd[r];
    // dnorm = weight · dout; the two row means below are the projections LayerNorm removes.
    float dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
#pragma omp simd reduction(+ : dnorm_sum, dnorm_norm_sum)
    for (int c = 0; c < C; ++c) {
      const float dnorm = weight[c] * dout_row[c];
      dnorm_sum += dnorm;
      dnorm_norm_sum += dnorm * (x_row[c] - m) * s;
    }
    const float dnorm_mean = dnorm_sum / C, dnorm_norm_mean = dnorm_norm_sum / C;
    float* dx_row = dx + static_cast<long>(r) * C;
    for (int c = 0; c < C; ++c) {
      const float norm = (x_row[c] - m) * s;
      dx_row[c] += (weight[c] * dout_row[c] - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  });
  for_each_column_block(C, "layernorm_backward_params", KOKKOS_LAMBDA(int first, int end) {
    for (int r = 0; r < rows; ++r) {
      const float* x_row = x + static_cast<long>(r) * C;
      const float* dout_row = dout + static_cast<long>(r) * C;
      const float m = mean[r], s = rstd[r];
      for (int c = first; c < end; ++c) {
        dweight[c] += (x_row[c] - m) * s * dout_row[c];
        dbias[c] += dout_row[c];
      }
    }
  });
}

}  // namespace trident
