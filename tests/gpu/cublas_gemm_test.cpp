#include "gpu/cublas_gemm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "device_vector.hpp"
#include "gpu_available.hpp"
#include "kernels/gemm.hpp"

namespace trident {
namespace {

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

double max_relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return worst / scale;
}

// cuBLAS against the CPU BLAS for every transpose combination, with beta ≠ 0 and padded leading
// dimensions; fp32 math agrees to float rounding, TF32 and bf16 to their 10- and 7-bit mantissas.
void check_against_cpu(GemmMath math, bool bf16_inputs, double tolerance) {
  const int m = 37, n = 45, k = 53, pad = 3;
  for (bool trans_a : {false, true})
    for (bool trans_b : {false, true}) {
      const int lda = (trans_a ? m : k) + pad, ldb = (trans_b ? k : n) + pad, ldc = n + pad;
      const auto a = random_values(static_cast<std::size_t>((trans_a ? k : m) * lda), 1);
      const auto b = random_values(static_cast<std::size_t>((trans_b ? n : k) * ldb), 2);
      auto c = random_values(static_cast<std::size_t>(m * ldc), 3);
      DeviceVector<float> c_device(c);
      CublasGemm cublas;
      GemmContext cpu;
      if (bf16_inputs) {
        std::vector<__nv_bfloat16> a16(a.begin(), a.end()), b16(b.begin(), b.end());
        std::vector<float> a_rounded(a16.begin(), a16.end()), b_rounded(b16.begin(), b16.end());
        DeviceVector<__nv_bfloat16> a_device(a16), b_device(b16);
        cublas.gemm(trans_a, trans_b, m, n, k, 0.5f, a_device.data, lda, b_device.data, ldb, 0.25f, c_device.data, ldc);
        gemm(cpu, trans_a, trans_b, m, n, k, 0.5f, a_rounded.data(), lda, b_rounded.data(), ldb, 0.25f, c.data(), ldc);
      } else {
        DeviceVector<float> a_device(a), b_device(b);
        cublas.gemm(trans_a, trans_b, m, n, k, 0.5f, a_device.data, lda, b_device.data, ldb, 0.25f, c_device.data, ldc,
                    math);
        gemm(cpu, trans_a, trans_b, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 0.25f, c.data(), ldc);
      }
      EXPECT_LT(max_relative_error(c_device.to_host(), c), tolerance) << "trans_a " << trans_a << " trans_b " << trans_b;
    }
}

TEST(CublasGemm, Fp32MatchesTheCpuBlas) {
  TRIDENT_SKIP_WITHOUT_GPU();
  check_against_cpu(GemmMath::fp32, false, 1e-5);
}

TEST(CublasGemm, Tf32MatchesTheCpuBlasToTf32Precision) {
  TRIDENT_SKIP_WITHOUT_GPU();
  check_against_cpu(GemmMath::tf32, false, 5e-3);
}

TEST(CublasGemm, Bf16InputsWithFp32AccumulationMatchTheCpuBlasOnTheRoundedInputs) {
  TRIDENT_SKIP_WITHOUT_GPU();
  check_against_cpu(GemmMath::fp32, true, 1e-5);
}

}  // namespace
}  // namespace trident
