// The choice of OpenBLAS's kernels from the CPU's flags (kernels/blas_core.hpp), as pure functions.
#include "kernels/blas_core.hpp"

#include <gtest/gtest.h>

namespace trident {
namespace {

const std::set<std::string> kAvx512{"sse3", "ssse3", "sse4_2", "avx", "avx2", "fma", "avx512f",
                                    "avx512cd", "avx512bw", "avx512dq", "avx512vl"};

TEST(BlasCore, AFallbackToSse3KernelsOnAnAvx512CpuIsReplaced) {
  EXPECT_EQ(better_blas_core("Prescott", kAvx512, false), "SkylakeX");
  std::set<std::string> bf16 = kAvx512;
  bf16.insert("avx512_bf16");
  EXPECT_EQ(better_blas_core("Prescott", bf16, false), "Cooperlake");
  EXPECT_EQ(better_blas_core("Sandybridge", kAvx512, false), "SkylakeX");
}

TEST(BlasCore, AChoiceOfTheWidestVectorsTheFlagsAllowIsKept) {
  EXPECT_EQ(better_blas_core("SkylakeX", kAvx512, false), "");
  std::set<std::string> bf16 = kAvx512;
  bf16.insert("avx512_bf16");
  EXPECT_EQ(better_blas_core("SkylakeX", bf16, false), "") << "the same vectors: no restart for bf16 products";
  EXPECT_EQ(better_blas_core("Zen", {"avx", "avx2", "fma"}, true), "");
}

TEST(BlasCore, Avx2CpusGetHaswellOrZenByVendor) {
  const std::set<std::string> avx2{"ssse3", "sse4_2", "avx", "avx2", "fma"};
  EXPECT_EQ(better_blas_core("Prescott", avx2, false), "Haswell");
  EXPECT_EQ(better_blas_core("Prescott", avx2, true), "Zen");
  EXPECT_EQ(best_blas_core({"ssse3", "sse4_2", "avx"}, false), "Sandybridge");
  EXPECT_EQ(best_blas_core({"ssse3", "sse4_2"}, false), "Nehalem");
  EXPECT_EQ(best_blas_core({"sse3"}, false), "Prescott");
}

TEST(BlasCore, AnAvx512CpuWithoutEveryAvx512PartIsNotSkylakeX) {
  std::set<std::string> partial = kAvx512;
  partial.erase("avx512vl");
  EXPECT_EQ(best_blas_core(partial, false), "Haswell");
}

TEST(BlasCore, CoresOfOtherArchitecturesAreLeftAlone) {
  EXPECT_EQ(blas_core_vector_class("NEOVERSEN1"), 0);
  EXPECT_EQ(better_blas_core("NEOVERSEN1", kAvx512, false), "");
}

}  // namespace
}  // namespace trident
