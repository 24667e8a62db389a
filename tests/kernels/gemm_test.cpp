#include "kernels/gemm.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <string>

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

// blas_info() names the library that ran. A build on OpenBLAS (TRIDENT_HAVE_OPENBLAS, which reaches
// this test through trident_kernels' interface as it reaches gemm_cblas.cpp) reports OpenBLAS's own
// configuration and core, never the "unknown" fallback that stands for any other CBLAS; a build on
// another CBLAS reports exactly that fallback, so a test that sees the library otherwise than
// gemm_cblas.cpp does fails either way. The GPU build reports cuBLAS and the device.
TEST(Gemm, ReportsLibraryAndPositivePeak) {
  const BlasInfo info = blas_info();
#if defined(TRIDENT_GPU_BUILD)
  EXPECT_EQ(info.library.rfind("cuBLAS ", 0), 0u) << info.library;
  EXPECT_NE(info.core.find(" (sm_"), std::string::npos) << info.core;
#elif defined(TRIDENT_HAVE_OPENBLAS)
  EXPECT_EQ(info.library.rfind("OpenBLAS ", 0), 0u) << info.library;
  EXPECT_FALSE(info.core.empty());
  std::string core = info.core;
  for (char& c : core) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_NE(core, "unknown") << "an OpenBLAS build reports the fallback core " << info.core;
#else
  EXPECT_EQ(info.library, "unknown");
  EXPECT_EQ(info.core, "unknown");
  EXPECT_EQ(info.threads, 1);
#endif
  EXPECT_GE(info.threads, 1);
  EXPECT_GT(measure_gemm_peak_gflops(), 0.1);
}

}  // namespace
}  // namespace trident
