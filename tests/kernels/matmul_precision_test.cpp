// The rounding of train.precision, value by value, and gemm() under it: a product at TF32 or bf16
// precision is exactly the fp32 product of the rounded inputs (and not the fp32 product itself).
#include "kernels/matmul_precision.hpp"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "gradient_check.hpp"
#include "kernels/gemm.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int kBf16 = 16, kTf32 = 13;

TEST(RoundSignificand, RoundsToNearestWithTiesToEven) {
  const float p = std::ldexp(1.0f, -8);  // half a bf16 unit at 1
  EXPECT_EQ(round_significand(1.0f + p, kBf16), 1.0f);                         // tie, down to even
  EXPECT_EQ(round_significand(1.0f + 3 * p, kBf16), 1.0f + 4 * p);             // tie, up to even
  EXPECT_EQ(round_significand(1.0f + p + std::ldexp(1.0f, -20), kBf16), 1.0f + 2 * p);  // past the tie
  EXPECT_EQ(round_significand(-(1.0f + 3 * p), kBf16), -(1.0f + 4 * p));
  const float q = std::ldexp(1.0f, -11);  // half a TF32 unit at 1
  EXPECT_EQ(round_significand(1.0f + q, kTf32), 1.0f);
  EXPECT_EQ(round_significand(1.0f + 3 * q, kTf32), 1.0f + 4 * q);
  EXPECT_EQ(round_significand(0.1f, 0), 0.1f);  // fp32: unchanged
}

TEST(RoundSignificand, SpecialValuesAndOverflow) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(round_significand(inf, kBf16), inf);
  EXPECT_EQ(round_significand(-inf, kTf32), -inf);
  EXPECT_TRUE(std::isnan(round_significand(std::numeric_limits<float>::quiet_NaN(), kBf16)));
  EXPECT_EQ(round_significand(FLT_MAX, kBf16), inf);  // past bf16's largest value
  EXPECT_EQ(round_significand(0.0f, kBf16), 0.0f);
}

TEST(MatmulPrecision, AutomaticIsFp32OnTheCpuBuild) {
  const GemmContext context;
#ifdef KOKKOS_ENABLE_CUDA
  EXPECT_EQ(context.precision(), MatmulPrecision::tf32);
#else
  EXPECT_EQ(context.precision(), MatmulPrecision::fp32);
#endif
}

// C = A·Bᵀ (A: m×k, B: n×k, both with padded rows), and the same as a strided batch of two.
struct Product {
  static constexpr int m = 13, n = 9, k = 21, ld = k + 3;
  FloatBuffer a = random_buffer(2 * m * ld, 1), b = random_buffer(2 * n * ld, 2);
  // A from element `offset` of its buffer (1: not 16-byte aligned, which the GPU build's operand
  // rounding handles apart).
  std::vector<float> single(MatmulPrecision precision, int offset = 0) {
    GemmContext context(precision);
    FloatBuffer c("c", m * n);
    gemm(context, false, true, m, n, k, 1.0f, a.data() + offset, ld, b.data(), ld, 0.0f, c.data(), n);
    return to_host(c);
  }
  std::vector<float> batched(MatmulPrecision precision) {
    GemmContext context(precision);
    FloatBuffer c("c", 2 * m * n);
    gemm_strided_batched(context, false, true, m, n, k, 1.0f, a.data(), ld, m * ld, b.data(), ld, n * ld, 0.0f,
                         c.data(), n, m * n, 2);
    return to_host(c);
  }
  void round_inputs(int dropped) {
    for (FloatBuffer* x : {&a, &b}) {
      std::vector<float> values = to_host(*x);
      for (float& v : values) v = round_significand(v, dropped);
      copy_to(*x, values);
    }
  }
};

#ifdef KOKKOS_ENABLE_CUDA
// The GPU build's unit tests run with TF32 off (NVIDIA_TF32_OVERRIDE=0; tests/gpu checks cuBLAS'
// TF32), and its bf16 kernel may sum in another order than the fp32 one.
constexpr std::pair<MatmulPrecision, int> kReduced[] = {{MatmulPrecision::bf16, kBf16}};
constexpr float kSameProduct = 1e-5f;
#else
constexpr std::pair<MatmulPrecision, int> kReduced[] = {{MatmulPrecision::tf32, kTf32}, {MatmulPrecision::bf16, kBf16}};
constexpr float kSameProduct = 0.0f;  // the same sgemm on the same values
#endif

void expect_same_product(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], kSameProduct * std::abs(want[i])) << what << " element " << i;
}

TEST(MatmulPrecision, ReducedPrecisionMultipliesTheRoundedInputsInFp32) {
  for (const auto& [precision, dropped] : kReduced) {
    Product product;
    const std::vector<float> reduced = product.single(precision), reduced_batch = product.batched(precision);
    const std::vector<float> reduced_unaligned = product.single(precision, 1);
    EXPECT_NE(reduced, product.single(MatmulPrecision::fp32)) << dropped << " bits: the inputs were not rounded";
    product.round_inputs(dropped);
    expect_same_product(reduced, product.single(MatmulPrecision::fp32), word_of(precision).c_str());
    expect_same_product(reduced_unaligned, product.single(MatmulPrecision::fp32, 1), word_of(precision).c_str());
    expect_same_product(reduced_batch, product.batched(MatmulPrecision::fp32), word_of(precision).c_str());
  }
}

// Under bf16 a product whose operand lies in a kept copy's buffer reads the copy: given a copy that
// holds the bits of 2·b (a copy no rounding of b could give), the product is 2·(a·bᵀ) of the rounded
// inputs; an operand outside the buffer (or only partly inside) is rounded as usual.
TEST(Bf16Copy, ProductsReadTheKeptCopyOfOperandsInsideItsBuffer) {
  Product product;
  product.round_inputs(kBf16);  // exact in bf16, so doubling them is too
  const std::vector<float> plain = product.single(MatmulPrecision::fp32);
  const long b_floats = static_cast<long>(product.b.extent(0));
  std::vector<std::uint16_t> doubled(b_floats);
  const std::vector<float> b = to_host(product.b);
  for (long i = 0; i < b_floats; ++i) doubled[i] = bf16_bits(2.0f * b[i]);
  Bf16Buffer copy("copy", b_floats);
  Kokkos::deep_copy(copy, Kokkos::View<const std::uint16_t*, Kokkos::HostSpace>(doubled.data(), b_floats));

  GemmContext context(MatmulPrecision::bf16);
  context.read_bf16_copy({product.b.data(), copy.data(), static_cast<std::size_t>(b_floats)});
  FloatBuffer c("c", Product::m * Product::n);
  gemm(context, false, true, Product::m, Product::n, Product::k, 1.0f, product.a.data(), Product::ld,
       product.b.data(), Product::ld, 0.0f, c.data(), Product::n);
  const std::vector<float> read = to_host(c);
  for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_NEAR(read[i], 2.0f * plain[i], kSameProduct * std::abs(plain[i]) + 1e-6f) << i;

  EXPECT_EQ(context.bf16_copy().of(product.a.data(), 1), nullptr);
  EXPECT_EQ(context.bf16_copy().of(product.b.data() + 5, b_floats - 5), copy.data() + 5);
  EXPECT_EQ(context.bf16_copy().of(product.b.data() + 5, b_floats - 4), nullptr);  // one past the buffer
}

// While a RoundedOnce lives, products read the operand's bf16 rounding made when it began, not the
// operand (here written to afterwards, which its users must not do, to see which one a product
// reads); after it, the operand again. A second at once is refused; at fp32 it does nothing.
TEST(RoundedOnce, ProductsReadTheRoundingMadeOnceWhileItLives) {
  Product product;
  const std::vector<float> first = product.single(MatmulPrecision::bf16);
  const std::vector<float> b = to_host(product.b);
  GemmContext context(MatmulPrecision::bf16);
  FloatBuffer c("c", Product::m * Product::n);
  auto multiply = [&] {
    gemm(context, false, true, Product::m, Product::n, Product::k, 1.0f, product.a.data(), Product::ld,
         product.b.data(), Product::ld, 0.0f, c.data(), Product::n);
    return to_host(c);
  };
  std::vector<float> doubled = b;
  for (float& v : doubled) v *= 2.0f;
  {
    const RoundedOnce rounded(context, product.b.data(), static_cast<long>(b.size()));
    copy_to(product.b, doubled);
    expect_same_product(multiply(), first, "while it lives");
    EXPECT_THROW(RoundedOnce(context, product.a.data(), 1), std::logic_error);
  }
  const std::vector<float> after = multiply();
  for (std::size_t i = 0; i < first.size(); ++i)
    EXPECT_NEAR(after[i], 2.0f * first[i], 1e-5f * std::abs(first[i])) << i;

  GemmContext fp32(MatmulPrecision::fp32);
  const RoundedOnce nothing(fp32, product.b.data(), static_cast<long>(b.size()));
  EXPECT_EQ(fp32.kept_bf16(product.b.data(), 1), nullptr);
}

Bf16Buffer bf16_bits_of(const FloatBuffer& x) {
  const std::vector<float> values = to_host(x);
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bits[i] = bf16_bits(values[i]);
  Bf16Buffer out("bits", bits.size());
  Kokkos::deep_copy(out, Kokkos::View<const std::uint16_t*, Kokkos::HostSpace>(bits.data(), bits.size()));
  return out;
}

// An operand stored in bf16 (a ProductInput) is read as it is: the same product as its fp32 values
// rounded by the product itself. Only bf16 reads one; B's column sums need B's fp32 values.
TEST(Bf16Operand, ProductsReadItAsTheRoundedValues) {
  Product product;
  const Bf16Buffer a16 = bf16_bits_of(product.a), b16 = bf16_bits_of(product.b);
  GemmContext context(MatmulPrecision::bf16);
  FloatBuffer c("c", Product::m * Product::n);
  gemm(context, false, true, Product::m, Product::n, Product::k, 1.0f, Operand::of_bf16(a16.data()), Product::ld,
       Operand::of_bf16(b16.data()), Product::ld, 0.0f, c.data(), Product::n);
  expect_same_product(to_host(c), product.single(MatmulPrecision::bf16), "bf16 operands");

  for (const MatmulPrecision other : {MatmulPrecision::fp32, MatmulPrecision::tf32}) {
    GemmContext wrong(other);
    EXPECT_THROW(gemm(wrong, false, true, Product::m, Product::n, Product::k, 1.0f, Operand::of_bf16(a16.data()),
                      Product::ld, product.b.data(), Product::ld, 0.0f, c.data(), Product::n),
                 std::logic_error);
  }
  Epilogue b_sums;
  const FloatBuffer sums("sums", Product::k), square("square", Product::k * Product::k);
  b_sums.b_column_sums = sums.data();
  EXPECT_THROW(gemm(context, true, false, Product::k, Product::k, Product::m, 1.0f, product.a.data(), Product::ld,
                    Operand::of_bf16(a16.data()), Product::ld, 0.0f, square.data(), Product::k, b_sums),
               std::logic_error);
}

}  // namespace
}  // namespace trident
