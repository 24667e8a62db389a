// The GPU's fused norm backward (gpu/norm_backward.cu) against its reference, the Kokkos kernels of
// the CPU build (kernels/layernorm.hpp, kernels/rmsnorm.hpp), on random inputs with every output
// already holding random values (all three are added to): GPT-2's and Llama 3.2 1B's widths, rows
// that do not fill the blocks, widths that end inside a warp's 128 columns, a tiny deck's, and two
// launches in a row (the last block resets the counter the next launch starts from). Skipped
// without a GPU.
#include "gpu/norm_backward.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "compare.hpp"
#include "device_vector.hpp"
#include "gpu_available.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/rmsnorm.hpp"
#include "random_values.hpp"

namespace trident {
namespace {

std::vector<float> positive(std::size_t n, unsigned seed) {
  std::vector<float> v = random_values(n, seed, 0.5f);
  for (float& value : v) value += 1.0f;  // [0.5, 1.5]: a row's 1/σ
  return v;
}

// One norm's backward: its inputs, and the gradients it adds into, as they were before.
struct Case {
  int rows, C;
  bool centred;  // LayerNorm (mean and bias) or RMSNorm
  std::vector<float> dout, x, mean, rstd, weight, dx, dweight, dbias;

  Case(int rows_, int C_, bool centred_)
      : rows(rows_), C(C_), centred(centred_), dout(random_values(size(), 21)), x(random_values(size(), 22, 2.0f)),
        mean(random_values(rows, 23)), rstd(positive(rows, 24)), weight(positive(C, 25)),
        dx(random_values(size(), 26)), dweight(random_values(C, 27)), dbias(random_values(C, 28)) {}
  std::size_t size() const { return static_cast<std::size_t>(rows) * C; }
};

struct Gradients {
  std::vector<float> dx, dweight, dbias;
};

// `launches` backward passes of the Kokkos kernel on the host.
Gradients kokkos_reference(const Case& c, int launches) {
  Gradients g{c.dx, c.dweight, c.dbias};
  const ColumnSumBuffers buffers(c.centred ? 2 : 1, c.C);
  for (int i = 0; i < launches; ++i) {
    if (c.centred)
      layernorm_backward(g.dx.data(), g.dweight.data(), g.dbias.data(), c.dout.data(), c.x.data(), c.mean.data(),
                         c.rstd.data(), c.weight.data(), c.rows, c.C, buffers.scratch());
    else
      rmsnorm_backward(g.dx.data(), g.dweight.data(), c.dout.data(), c.x.data(), c.rstd.data(), c.weight.data(),
                       c.rows, c.C, buffers.scratch());
  }
  return g;
}

// The same on the GPU's fused kernel, its scratch poisoned beforehand.
Gradients fused(const Case& c, int launches) {
  DeviceVector<float> dout(c.dout), x(c.x), mean(c.mean), rstd(c.rstd), weight(c.weight), dx(c.dx),
      dweight(c.dweight), dbias(c.dbias), partials(poisoned(norm_backward_scratch_floats(c.C, c.centred)));
  DeviceVector<int> finished(std::vector<int>{0});
  const NormBackwardArgs args{dx.data,     dweight.data, c.centred ? dbias.data : nullptr, dout.data, x.data,
                              c.centred ? mean.data : nullptr, rstd.data, weight.data, c.rows, c.C, partials.data,
                              finished.data};
  EXPECT_TRUE(norm_backward_supports(args));
  for (int i = 0; i < launches; ++i) norm_backward(args, nullptr);
  TRIDENT_GPU_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(finished.to_host()[0], 0);
  return {dx.to_host(), dweight.to_host(), dbias.to_host()};
}

// The same sums in another order: float rounding only.
void expect_fused_matches_kokkos(const Case& c, int launches = 1) {
  const Gradients want = kokkos_reference(c, launches), got = fused(c, launches);
  EXPECT_LT(relative_error(got.dx, want.dx), 1e-5);
  EXPECT_LT(relative_error(got.dweight, want.dweight), 1e-5);
  EXPECT_LT(relative_error(got.dbias, want.dbias), 1e-5);  // RMSNorm: left as it was
}

TEST(NormBackward, LayerNormMatchesTheKokkosKernelAtGpt2sWidth) {
  TRIDENT_SKIP_WITHOUT_GPU();
  expect_fused_matches_kokkos(Case(1000, 768, true));
}

TEST(NormBackward, RmsNormMatchesTheKokkosKernelAtLlamasWidth) {
  TRIDENT_SKIP_WITHOUT_GPU();
  expect_fused_matches_kokkos(Case(700, 2048, false));
}

TEST(NormBackward, MatchesTheKokkosKernelOnWidthsThatEndInsideAWarpsColumns) {
  TRIDENT_SKIP_WITHOUT_GPU();
  expect_fused_matches_kokkos(Case(37, 1000, true));
  expect_fused_matches_kokkos(Case(5000, 1500, false));
  expect_fused_matches_kokkos(Case(3, 64, false));  // the small deck's: fewer rows than a block's warps
}

TEST(NormBackward, ASecondLaunchStartsFromTheCounterTheFirstReset) {
  TRIDENT_SKIP_WITHOUT_GPU();
  expect_fused_matches_kokkos(Case(300, 256, true), 2);
}

TEST(NormBackward, TakesOnlyTheShapesItsRegistersHold) {
  alignas(16) static float buffer[8];
  NormBackwardArgs args{buffer, buffer, buffer, buffer, buffer, buffer, buffer, buffer, 4, 768, buffer, nullptr};
  EXPECT_TRUE(norm_backward_supports(args));
  args.C = 1028;  // LayerNorm: up to 1024
  EXPECT_FALSE(norm_backward_supports(args));
  args.mean = nullptr;  // RMSNorm: up to 2048
  EXPECT_TRUE(norm_backward_supports(args));
  args.C = 2052;
  EXPECT_FALSE(norm_backward_supports(args));
  args.C = 766;  // rows not 16 bytes apart
  EXPECT_FALSE(norm_backward_supports(args));
  args.C = 768;
  args.x = buffer + 1;  // not 16-byte aligned
  EXPECT_FALSE(norm_backward_supports(args));
}

}  // namespace
}  // namespace trident
