// gemm.hpp on the CPU: BLAS through its C interface. TF32 and bf16 precisions are emulated: the
// operands are rounded copies (kernels/matmul_precision.hpp), or the kept bf16 copy widened,
// multiplied in fp32.
#include <cblas.h>

#include "kernels/blas_core.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_epilogue.hpp"
#include "kernels/matmul_precision.hpp"
#include "kernels/profile.hpp"

namespace trident {

struct GemmContext::Library {
  OperandScratch scratch;
  EpilogueScratch epilogue;
};

GemmContext::GemmContext(MatmulPrecision precision)
    : precision_(resolve_matmul_precision(precision)), library_(std::make_unique<Library>()) {}

GemmContext::~GemmContext() = default;

namespace {

void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
           int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// x[0, n) as the context's precision reads it: itself in fp32, else a rounded copy; bf16 bits (a
// ProductInput, or the kept copy of the weights where x lies in its buffer) widened: the same values.
const float* operand(GemmContext& context, int slot, Operand x, long n, int dropped) {
  OperandScratch& scratch = context.library().scratch;
  if (dropped != 16) return dropped == 0 ? x.fp32_values() : scratch.rounded(slot, x.fp32_values(), n, dropped);
  if (x.bf16) return scratch.widened(slot, x.bf16, n);
  if (const std::uint16_t* kept = context.kept_bf16(x.fp32, n)) return scratch.widened(slot, kept, n);
  return scratch.rounded(slot, x.fp32, n, dropped);
}

// The operands as the context's precision reads them.
struct Operands {
  const float* a;
  const float* b;
  Operands(GemmContext& context, bool trans_a, bool trans_b, int m, int n, int k, Operand a_in, int lda, long stride_a,
           Operand b_in, int ldb, long stride_b, int batches) {
    const int dropped = dropped_significand_bits(context.precision());
    a = operand(context, 0, a_in, operand_extent(trans_a ? k : m, trans_a ? m : k, lda, batches, stride_a), dropped);
    b = operand(context, 1, b_in, operand_extent(trans_b ? n : k, trans_b ? k : n, ldb, batches, stride_b), dropped);
  }
};

}  // namespace

const std::uint16_t* bf16_copy_in_scratch(GemmContext& context, int slot, const float* x, long n) {
  std::uint16_t* bits = context.library().scratch.halves(slot, n);
  declare_kernel_cost(KernelCost::of_floats(n, 0.5 * n, n));
  Kokkos::parallel_for("bf16_operand", Kokkos::RangePolicy<ExecSpace>(0, n),
                       KOKKOS_LAMBDA(long i) { bits[i] = bf16_bits(x[i]); });
  return bits;
}

void gemm(GemmContext& context, bool trans_a, bool trans_b, int m, int n, int k, float alpha, Operand a, int lda,
          Operand b, int ldb, float beta, float* c, int ldc, const Epilogue& epilogue) {
  declare_kernel_cost(product_cost(context, m, n, k, beta));
  const ProfileRegion product(kProductRegion);
  beta = prepare_epilogue(epilogue, beta, trans_b, b, c, m, n, ldc);
  const Operands in(context, trans_a, trans_b, m, n, k, a, lda, 0, b, ldb, 0, 1);
  sgemm(trans_a, trans_b, m, n, k, alpha, in.a, lda, in.b, ldb, beta, c, ldc);
  finish_epilogue(epilogue, c, m, n, ldc, b.fp32, ldb, k, context.library().epilogue);
}

void gemm_strided_batched(GemmContext& context, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                          const float* a, int lda, long stride_a, const float* b, int ldb, long stride_b, float beta,
                          float* c, int ldc, long stride_c, int batches) {
  declare_kernel_cost(product_cost(context, m, n, k, beta, batches));
  const ProfileRegion product(kProductRegion);
  const Operands in(context, trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb, stride_b, batches);
  for (int i = 0; i < batches; ++i)
    sgemm(trans_a, trans_b, m, n, k, alpha, in.a + i * stride_a, lda, in.b + i * stride_b, ldb, beta, c + i * stride_c,
          ldc);
}

BlasInfo blas_info() {
#ifdef TRIDENT_HAVE_OPENBLAS
  return {openblas_get_config(), openblas_get_corename(), openblas_get_num_threads(), blas_core_note()};
#else
  return {"unknown", "unknown", 1};
#endif
}

}  // namespace trident
