#include "gpu/cublas_gemm.hpp"
#include "gpu/cublaslt_gemm.hpp"

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

// cuBLASLt with each epilogue fused, in strict fp32, against the CPU build's gemm() with the same
// epilogue (kernels/gemm_epilogue.cpp): the bias, GELU keeping its input, GELU's gradient with its
// bias gradient, and a weight gradient's bias gradient (added to what the sums held).
struct EpilogueCase {
  static constexpr int m = 64, n = 96, k = 40;  // n: the auxiliary matrix's leading dimension, a multiple of 8
  std::vector<float> a = random_values(m * k, 11), b = random_values(k * n, 12), bias = random_values(n, 13);
  std::vector<float> z = random_values(m * n, 14), sums = random_values(n, 15), c = random_values(m * n, 16);
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  EXPECT_LT(max_relative_error(got, want), 1e-5) << what;
}

TEST(CublasLtGemm, FusedEpiloguesMatchTheCpuBuild) {
  TRIDENT_SKIP_WITHOUT_GPU();
  CublasLtGemm lt;
  GemmContext cpu(MatmulPrecision::fp32);
  const EpilogueCase x;
  constexpr int m = EpilogueCase::m, n = EpilogueCase::n, k = EpilogueCase::k;
  DeviceVector<float> a(x.a), b(x.b), bias(x.bias), z(x.z);
  {  // y = a · b + bias, and GELU's pre-activation kept
    DeviceVector<float> c(x.c), pre(x.c);
    std::vector<float> c_cpu(x.c), pre_cpu(x.c);
    ASSERT_TRUE(lt.gemm(false, false, m, n, k, 1.0f, a.data, k, b.data, n, CUDA_R_32F, CUBLAS_COMPUTE_32F, 0.0f, c.data,
                        n, FusedEpilogue{bias.data, pre.data}));
    Epilogue e;
    e.bias = x.bias.data();
    e.pre_gelu = pre_cpu.data();
    gemm(cpu, false, false, m, n, k, 1.0f, x.a.data(), k, x.b.data(), n, 0.0f, c_cpu.data(), n, e);
    expect_close(c.to_host(), c_cpu, "gelu(a·b + bias)");
    expect_close(pre.to_host(), pre_cpu, "a·b + bias");
  }
  {  // dz = (a · bᵀ-shaped product) ⊙ gelu'(z), its column sums added
    DeviceVector<float> c(x.c), sums(x.sums);
    std::vector<float> c_cpu(x.c), sums_cpu(x.sums);
    const std::vector<float> bt = random_values(n * k, 17);
    DeviceVector<float> b_t(bt);
    FusedEpilogue fused;
    fused.gelu_input = z.data;
    fused.column_sums = sums.data;
    ASSERT_TRUE(lt.gemm(false, true, m, n, k, 1.0f, a.data, k, b_t.data, k, CUDA_R_32F, CUBLAS_COMPUTE_32F, 0.0f, c.data,
                        n, fused));
    Epilogue e;
    e.gelu_input = x.z.data();
    e.column_sums = sums_cpu.data();
    gemm(cpu, false, true, m, n, k, 1.0f, x.a.data(), k, bt.data(), k, 0.0f, c_cpu.data(), n, e);
    expect_close(c.to_host(), c_cpu, "(a·bᵀ) ⊙ gelu'(z)");
    expect_close(sums.to_host(), sums_cpu, "its column sums");
  }
  {  // a weight gradient: w[k', n] += aᵀ · b with b's column sums added (a as [k, k'], k' = m here)
    DeviceVector<float> c(x.c), sums(x.sums);
    std::vector<float> c_cpu(x.c), sums_cpu(x.sums);
    const std::vector<float> at = random_values(k * m, 18);
    DeviceVector<float> a_t(at);
    FusedEpilogue fused;
    fused.b_column_sums = sums.data;
    ASSERT_TRUE(lt.gemm(true, false, m, n, k, 1.0f, a_t.data, m, b.data, n, CUDA_R_32F, CUBLAS_COMPUTE_32F, 1.0f, c.data,
                        n, fused));
    Epilogue e;
    e.b_column_sums = sums_cpu.data();
    gemm(cpu, true, false, m, n, k, 1.0f, at.data(), m, x.b.data(), n, 1.0f, c_cpu.data(), n, e);
    expect_close(c.to_host(), c_cpu, "c + aᵀ·b");
    expect_close(sums.to_host(), sums_cpu, "b's column sums");
  }
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
