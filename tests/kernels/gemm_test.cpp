#include "kernels/gemm.hpp"

#include <gtest/gtest.h>

#include "gradient_check.hpp"

namespace trident {
namespace {

using testing::random_buffer;
using testing::to_host;

// op(A) is m × k, op(B) is k × n; every matrix has a leading dimension wider than its rows.
void check_gemm(bool trans_a, bool trans_b) {
  const int m = 5, n = 7, k = 9, pad = 3;
  const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
  const int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  const int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
  const FloatBuffer a = random_buffer(a_rows * lda, 1), b = random_buffer(b_rows * ldb, 2), c = random_buffer(m * ldc, 3);
  const std::vector<float> ha = to_host(a), hb = to_host(b), c_before = to_host(c);
  const float alpha = 0.7f, beta = 0.3f;

  GemmContext context;
  gemm(context, trans_a, trans_b, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);

  const std::vector<float> hc = to_host(c);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < ldc; ++j) {
      if (j >= n) {  // padding columns are not part of C and must be untouched
        EXPECT_EQ(hc[i * ldc + j], c_before[i * ldc + j]);
        continue;
      }
      double sum = 0.0;
      for (int p = 0; p < k; ++p) {
        const double a_ip = trans_a ? ha[p * lda + i] : ha[i * lda + p];
        const double b_pj = trans_b ? hb[j * ldb + p] : hb[p * ldb + j];
        sum += a_ip * b_pj;
      }
      EXPECT_NEAR(hc[i * ldc + j], alpha * sum + beta * c_before[i * ldc + j], 1e-5)
          << "trans_a=" << trans_a << " trans_b=" << trans_b << " at (" << i << ", " << j << ")";
    }
}

TEST(Gemm, NoTransposeMatchesNaiveProduct) { check_gemm(false, false); }
TEST(Gemm, TransposedBMatchesNaiveProduct) { check_gemm(false, true); }
TEST(Gemm, TransposedAMatchesNaiveProduct) { check_gemm(true, false); }
TEST(Gemm, BothTransposedMatchesNaiveProduct) { check_gemm(true, true); }

TEST(Gemm, ReportsLibraryAndPositivePeak) {
  const BlasInfo info = blas_info();
  EXPECT_FALSE(info.library.empty());
  EXPECT_FALSE(info.core.empty());
  EXPECT_GE(info.threads, 1);
  EXPECT_GT(measure_gemm_peak_gflops(), 0.1);
}

}  // namespace
}  // namespace trident
