#include "kernels/tied_head.hpp"

#include <gtest/gtest.h>

#include "gradient_check.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int rows = 5, C = 7, V = 70;
constexpr float kScale = 0.37f;

TEST(TiedHead, ForwardIsInputTimesEmbeddingTransposed) {
  GemmContext gemm;
  const FloatBuffer x = random_buffer(rows * C, 1), wte = random_buffer(V * C, 2), logits("logits", rows * V);
  tied_head_forward(gemm, logits.data(), x.data(), wte.data(), rows, C, V, V);
  const auto hx = to_host(x), hw = to_host(wte), hl = to_host(logits);
  for (int r = 0; r < rows; ++r)
    for (int v = 0; v < V; ++v) {
      double sum = 0.0;
      for (int c = 0; c < C; ++c) sum += double(hx[r * C + c]) * hw[v * C + c];
      EXPECT_NEAR(hl[r * V + v], sum, 1e-5);
    }
}

// A row stride past V (a vocab-parallel rank's padding columns): those columns are neither written
// nor read.
TEST(TiedHead, PaddingColumnsOfStridedLogitsAreUntouchedAndIgnored) {
  GemmContext gemm;
  constexpr int ld = V + 3;
  const FloatBuffer x = random_buffer(rows * C, 1), wte = random_buffer(V * C, 2);
  const FloatBuffer dense("dense", rows * V), strided("strided", rows * ld);
  Kokkos::deep_copy(strided, std::nanf(""));
  tied_head_forward(gemm, dense.data(), x.data(), wte.data(), rows, C, V, V);
  tied_head_forward(gemm, strided.data(), x.data(), wte.data(), rows, C, V, ld);
  const auto d = to_host(dense), s = to_host(strided);
  for (int r = 0; r < rows; ++r) {
    for (int v = 0; v < V; ++v) EXPECT_EQ(s[r * ld + v], d[r * V + v]);
    for (int v = V; v < ld; ++v) EXPECT_TRUE(std::isnan(s[r * ld + v]));
  }
  // Backward through the strided logits, NaN padding included, equals backward through the dense ones.
  const FloatBuffer dx_dense("dx_dense", rows * C), dx_strided("dx_strided", rows * C);
  const FloatBuffer dwte_dense("dwte_dense", V * C), dwte_strided("dwte_strided", V * C);
  tied_head_backward_input(gemm, dx_dense.data(), dense.data(), wte.data(), kScale, rows, C, V, V);
  tied_head_backward_input(gemm, dx_strided.data(), strided.data(), wte.data(), kScale, rows, C, V, ld);
  tied_head_backward_weight(gemm, dwte_dense.data(), dense.data(), x.data(), kScale, rows, C, V, V);
  tied_head_backward_weight(gemm, dwte_strided.data(), strided.data(), x.data(), kScale, rows, C, V, ld);
  EXPECT_EQ(to_host(dx_strided), to_host(dx_dense));
  EXPECT_EQ(to_host(dwte_strided), to_host(dwte_dense));
}

TEST(TiedHead, BackwardMatchesFiniteDifferencesOfScaledObjective) {
  GemmContext gemm;
  const FloatBuffer x = random_buffer(rows * C, 1), wte = random_buffer(V * C, 2), logits("logits", rows * V);
  const FloatBuffer dlogits = random_buffer(rows * V, 3);
  auto objective = [&] {
    tied_head_forward(gemm, logits.data(), x.data(), wte.data(), rows, C, V, V);
    return kScale * dot(dlogits, logits);
  };
  const FloatBuffer dx = random_buffer(rows * C, 4), dwte = random_buffer(V * C, 5);
  const auto dwte_before = to_host(dwte);
  tied_head_backward_input(gemm, dx.data(), dlogits.data(), wte.data(), kScale, rows, C, V, V);
  tied_head_backward_weight(gemm, dwte.data(), dlogits.data(), x.data(), kScale, rows, C, V, V);
  expect_gradient("x", x, to_host(dx), objective, 1e-2f);
  expect_gradient("wte", wte, difference(to_host(dwte), dwte_before), objective, 1e-2f);
}

}  // namespace
}  // namespace trident
