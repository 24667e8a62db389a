#include "kernels/gemm_epilogue.hpp"

#include <stdexcept>

#include "kernels/gelu.hpp"
#include "kernels/matmul_precision.hpp"
#include "kernels/row_teams.hpp"

namespace trident {

ColumnSumScratch EpilogueScratch::for_columns(int columns) {
  if (columns > columns_) {
    buffers_ = std::make_unique<ColumnSumBuffers>(1, columns);
    columns_ = columns;
  }
  return buffers_->scratch();
}

float prepare_epilogue(const Epilogue& epilogue, float beta, bool trans_b, Operand b, float* c, int m, int n, int ldc) {
  if ((epilogue.bias || epilogue.gelu_input) && beta != 0.0f)
    throw std::logic_error("gemm: a bias or GELU gradient epilogue needs beta = 0");
  if (epilogue.b_column_sums && trans_b) throw std::logic_error("gemm: B's column sums need B not transposed");
  if (epilogue.b_column_sums && !b.fp32) throw std::logic_error("gemm: B's column sums need B's fp32 values");
  if (!epilogue.bias) return beta;
  const float* bias = epilogue.bias;
  declare_kernel_cost(KernelCost::of_floats(n, static_cast<double>(m) * n));
  for_each_row("gemm_bias", m, KOKKOS_LAMBDA(const RowTeam& team, int r) {
    float* row = c + static_cast<long>(r) * ldc;
    row_for(team, 0, n, [&](int j) { row[j] = bias[j]; });
  });
  return 1.0f;
}

namespace {

void apply_gelu(float* c, float* pre_gelu, int m, int n, int ldc) {
  const double elements = static_cast<double>(m) * n;
  declare_kernel_cost(KernelCost::of_floats(elements, 2.0 * elements, 12.0 * elements));
  for_each_row("gemm_gelu", m, KOKKOS_LAMBDA(const RowTeam& team, int r) {
    float* row = c + static_cast<long>(r) * ldc;
    float* kept = pre_gelu + static_cast<long>(r) * ldc;
    row_for(team, 0, n, [&](int j) {
      kept[j] = row[j];
      row[j] = gelu_math::gelu(row[j]);
    });
  });
}

// C ⊙= gelu'(gelu_input) where given, and C's column sums added to `sums` where given: one pass.
void gelu_grad_and_column_sums(float* c, const float* gelu_input, float* sums, int m, int n, int ldc,
                               const ColumnSumScratch& scratch) {
  const double elements = static_cast<double>(m) * n, inputs = gelu_input ? 2.0 : 1.0;
  declare_kernel_cost(KernelCost::of_floats(inputs * elements + n, (gelu_input ? elements : 0.0) + n,
                                            (gelu_input ? 14.0 : 1.0) * elements));
  rows_with_column_sums<1>(
      gelu_input ? "gemm_gelu_grad" : "gemm_column_sums", m, n, Destinations<1>{sums}, scratch,
      KOKKOS_LAMBDA(const RowTeam& team, int r, const ColumnAdder<1>& add) {
        float* row = c + static_cast<long>(r) * ldc;
        const float* input = gelu_input ? gelu_input + static_cast<long>(r) * ldc : nullptr;
        row_for(team, 0, n, [&](int j) {
          if (input) row[j] *= gelu_math::gelu_grad(input[j]);
          add(j, Terms<1>{row[j]});
        });
      });
}

}  // namespace

void finish_epilogue(const Epilogue& epilogue, float* c, int m, int n, int ldc, const float* b, int ldb, int k,
                     EpilogueScratch& scratch) {
  if (epilogue.pre_gelu) apply_gelu(c, epilogue.pre_gelu, m, n, ldc);
  if (epilogue.gelu_input || epilogue.column_sums)
    gelu_grad_and_column_sums(c, epilogue.gelu_input, epilogue.column_sums, m, n, ldc, scratch.for_columns(n));
  if (float* sums = epilogue.b_column_sums) {
    declare_kernel_cost(KernelCost::of_floats(static_cast<double>(k) * n + n, n, static_cast<double>(k) * n));
    add_rows_into<1>(
        "gemm_b_column_sums", k, n, KOKKOS_LAMBDA(int) { return Destinations<1>{sums}; },
        KOKKOS_LAMBDA(int r, int j) { return Terms<1>{b[static_cast<long>(r) * ldb + j]}; });
  }
}

void gelu_into_bf16(std::uint16_t* y, const float* z, long n) {
  declare_kernel_cost(KernelCost::of_floats(n, 0.5 * n, 12.0 * n));
  Kokkos::parallel_for("gelu_bf16", Kokkos::RangePolicy<ExecSpace>(0, n),
                       KOKKOS_LAMBDA(long i) { y[i] = bf16_bits(gelu_math::gelu(z[i])); });
}

}  // namespace trident
