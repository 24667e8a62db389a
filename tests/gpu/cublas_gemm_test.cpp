#include "gpu/cublas_gemm.hpp"
#include "gpu/cublaslt_gemm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "device_vector.hpp"
#include "gpu_available.hpp"
#include "kernels/gemm.hpp"
#include "random_values.hpp"

namespace trident {
namespace {

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

// cuBLASLt with each epilogue fused, in strict fp32, against the CPU build's gemm() with the same
// epilogue (kernels/gemm_epilogue.cpp): the bias, GELU keeping its input, GELU's gradient with its
// bias gradient, and a weight gradient's bias gradient (added to what the sums held).
constexpr int kM = 64, kN = 96, kK = 40;  // kN: the auxiliary matrix's leading dimension, a multiple of 8

// The parts of the epilogue a case uses.
struct Parts {
  bool bias = false, pre_gelu = false, gelu_input = false, column_sums = false, b_column_sums = false;
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  EXPECT_LT(max_relative_error(got, want), 1e-5) << what;
}

void check_fused(bool trans_a, bool trans_b, float beta, Parts parts, const std::string& what) {
  const int lda = trans_a ? kM : kK, ldb = trans_b ? kK : kN;
  const std::vector<float> a = random_values(kM * kK, 11), b = random_values(kK * kN, 12), bias = random_values(kN, 13);
  const std::vector<float> z = random_values(kM * kN, 14), sums = random_values(kN, 15), c = random_values(kM * kN, 16);
  DeviceVector<float> a_device(a), b_device(b), bias_device(bias), z_device(z), c_device(c), pre_device(c),
      sums_device(sums);
  std::vector<float> c_cpu(c), pre_cpu(c), sums_cpu(sums);
  FusedEpilogue fused;
  Epilogue cpu_epilogue;
  if (parts.bias) fused.bias = bias_device.data, cpu_epilogue.bias = bias.data();
  if (parts.pre_gelu) fused.pre_gelu = pre_device.data, cpu_epilogue.pre_gelu = pre_cpu.data();
  if (parts.gelu_input) fused.gelu_input = z_device.data, cpu_epilogue.gelu_input = z.data();
  if (parts.column_sums) fused.column_sums = sums_device.data, cpu_epilogue.column_sums = sums_cpu.data();
  if (parts.b_column_sums) fused.b_column_sums = sums_device.data, cpu_epilogue.b_column_sums = sums_cpu.data();
  CublasLtGemm lt;
  ASSERT_TRUE(lt.gemm(trans_a, trans_b, kM, kN, kK, 1.0f, a_device.data, lda, b_device.data, ldb, CUDA_R_32F,
                      CUBLAS_COMPUTE_32F, beta, c_device.data, kN, fused))
      << what;
  GemmContext cpu(MatmulPrecision::fp32);
  gemm(cpu, trans_a, trans_b, kM, kN, kK, 1.0f, a.data(), lda, b.data(), ldb, beta, c_cpu.data(), kN, cpu_epilogue);
  expect_close(c_device.to_host(), c_cpu, what);
  if (parts.pre_gelu) expect_close(pre_device.to_host(), pre_cpu, what + ": the pre-activation");
  if (parts.column_sums || parts.b_column_sums) expect_close(sums_device.to_host(), sums_cpu, what + ": the sums");
}

TEST(CublasLtGemm, FusedEpiloguesMatchTheCpuBuild) {
  TRIDENT_SKIP_WITHOUT_GPU();
  check_fused(false, false, 0.0f, {.bias = true}, "a·b + bias");
  check_fused(false, false, 0.0f, {.bias = true, .pre_gelu = true}, "gelu(a·b + bias)");
  check_fused(false, true, 0.0f, {.gelu_input = true, .column_sums = true}, "(a·bᵀ) ⊙ gelu'(z) and its column sums");
  check_fused(true, false, 1.0f, {.b_column_sums = true}, "c + aᵀ·b and b's column sums");
}

// Where cuBLASLt cannot fuse (an auxiliary matrix whose leading dimension is not a multiple of 8),
// gemm() says so and leaves C untouched, for the caller's other path.
TEST(CublasLtGemm, RefusesWhatItCannotFuse) {
  TRIDENT_SKIP_WITHOUT_GPU();
  CublasLtGemm lt;
  constexpr int m = 5, n = 7, k = 3;
  const std::vector<float> before = random_values(m * n, 21);
  DeviceVector<float> a(random_values(m * k, 19)), b(random_values(k * n, 20)), c(before), pre(before);
  FusedEpilogue fused;
  fused.pre_gelu = pre.data;
  EXPECT_FALSE(lt.gemm(false, false, m, n, k, 1.0f, a.data, k, b.data, n, CUDA_R_32F, CUBLAS_COMPUTE_32F, 0.0f, c.data,
                       n, fused));
  EXPECT_EQ(c.to_host(), before);
  FusedEpilogue sums_without_gelu;
  sums_without_gelu.column_sums = pre.data;
  EXPECT_FALSE(lt.gemm(false, false, m, n, k, 1.0f, a.data, k, b.data, n, CUDA_R_32F, CUBLAS_COMPUTE_32F, 0.0f, c.data,
                       n, sums_without_gelu));
}

}  // namespace
}  // namespace trident
