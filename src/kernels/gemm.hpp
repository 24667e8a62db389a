// Every matrix product of the model goes through this interface; the build chooses the library
// behind it: BLAS (cblas, gemm_cblas.cpp) on the CPU build, cuBLAS (gemm_cublas.cpp) on the GPU
// build. Row-major throughout, as the tensors are; pointers are device pointers (kernels/device.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "deck/config.hpp"
#include "kernels/profile.hpp"

namespace trident {

// A bf16 copy kept of an fp32 buffer (under train.precision = "bf16", the parameters' copy that the
// optimizer writes: model/param_store.hpp). A product whose operand lies inside `values` reads the
// copy at the same offset instead of rounding the operand itself: the same bits, without the
// product's own conversion (on the GPU, the weights go to cuBLAS as they are).
struct Bf16Copy {
  const float* values = nullptr;
  const std::uint16_t* bits = nullptr;
  std::size_t size = 0;
  // The copy of x[0, extent), or null when that range is not inside `values`.
  const std::uint16_t* of(const float* x, long extent) const;
};

// A product's operand as it is stored: fp32 values, or bf16 bits (an activation that only products
// read, kept in bf16 under train.precision = "bf16": ProductInput). A bf16 operand is read as it is
// (the CPU build widens it exactly); any other precision given one is a bug (std::logic_error).
struct Operand {
  const float* fp32 = nullptr;
  const std::uint16_t* bf16 = nullptr;
  Operand(const float* values) : fp32(values) {}  // NOLINT(google-explicit-constructor): fp32 is the default
  static Operand of_bf16(const std::uint16_t* bits) {
    Operand operand(nullptr);
    operand.bf16 = bits;
    return operand;
  }
  // The fp32 values, for a precision that reads them as they are (fp32, TF32).
  const float* fp32_values() const {
    if (bf16) throw std::logic_error("gemm: a bf16 operand outside train.precision = \"bf16\"");
    return fp32;
  }
};

// An activation whose only readers are matrix products (GELU's and SwiGLU's outputs, the norms';
// also a gradient, SwiGLU's backward's d(gate | up)),
// stored as they read it: bf16 bits under train.precision = "bf16", which halves its memory and
// spares every product that reads it a rounding pass; fp32 otherwise. At most one of the two is set
// (neither while a stash's layout is only being counted).
struct ProductInput {
  float* fp32 = nullptr;
  std::uint16_t* bf16 = nullptr;
  ProductInput(float* values = nullptr) : fp32(values) {}  // NOLINT(google-explicit-constructor): as Operand
  static ProductInput of_bf16(std::uint16_t* bits) {
    ProductInput input;
    input.bf16 = bits;
    return input;
  }
  operator Operand() const { return bf16 ? Operand::of_bf16(bf16) : Operand(fp32); }  // NOLINT
};

// Floats a ProductInput of `elements` takes in a float arena: all of them, or under bf16 half,
// rounded up to whole 16-byte groups so that the tensors after it stay 16-byte aligned.
inline std::size_t product_input_floats(std::size_t elements, bool bf16) {
  return bf16 ? (elements + 7) / 8 * 4 : elements;
}

// What every product reads besides its operands: the precision it multiplies in (deck key
// train.precision, kernels/matmul_precision.hpp), the bf16 copy of the weights where one is kept,
// and the library's state (scratch for rounded operand copies; the cuBLAS handle on the GPU build).
// The model owns one and passes it to each kernel that multiplies; nothing about products is
// process-wide. Holds device memory, so it must be destroyed before Kokkos finalises.
class GemmContext {
 public:
  // `automatic` resolves to fp32 on the CPU build and TF32 on the GPU build.
  explicit GemmContext(MatmulPrecision precision = MatmulPrecision::automatic);
  ~GemmContext();
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;

  MatmulPrecision precision() const { return precision_; }  // never `automatic`

  // Under bf16, products read `copy` for operands inside its buffer (Bf16Copy).
  void read_bf16_copy(const Bf16Copy& copy) { bf16_copy_ = copy; }
  const Bf16Copy& bf16_copy() const { return bf16_copy_; }
  // The bf16 bits a product reads for x[0, n) where they are kept: the weights' copy or a live
  // RoundedOnce's; null where the product must round x itself.
  const std::uint16_t* kept_bf16(const float* x, long n) const {
    const std::uint16_t* kept = bf16_copy_.of(x, n);
    return kept ? kept : rounded_once_.of(x, n);
  }

  struct Library;  // defined by gemm_cblas.cpp or gemm_cublas.cpp
  Library& library() { return *library_; }

 private:
  friend class RoundedOnce;
  MatmulPrecision precision_;
  Bf16Copy bf16_copy_;
  Bf16Copy rounded_once_;
  std::unique_ptr<Library> library_;
};

// An output gradient that both products of its layer's backward read (the input gradient's and,
// when it runs now, the weight gradient's), rounded to bf16 once for the two under
// train.precision = "bf16": while a RoundedOnce lives, products read x[0, n) from its copy as they
// read the weights' kept one (the same bits as rounding x themselves), so nothing may write x.
// At other precisions, or for n = 0, it does nothing. One lives at a time per context (its copy
// is the context's; std::logic_error for a second), made by the library's bf16_copy_in_scratch.
class RoundedOnce {
 public:
  RoundedOnce(GemmContext& context, const float* x, long n);
  ~RoundedOnce() { context_.rounded_once_ = {}; }
  RoundedOnce(const RoundedOnce&) = delete;
  RoundedOnce& operator=(const RoundedOnce&) = delete;

 private:
  GemmContext& context_;
};

// What a product does to its result besides C = α·op(A)·op(B) + β·C, in the same call: the bias,
// the GELU and its gradient, and bias gradients. A library may fuse them into the product
// (cuBLASLt's epilogues); otherwise kernels run before and after it, inside the product's profile
// region (kernels/gemm_epilogue.hpp). Row-major as gemm(): a column of C is an output feature.
struct Epilogue {
  const float* bias = nullptr;        // C[r, :] += bias, before any activation (β must be 0)
  float* pre_gelu = nullptr;          // z = α·op(A)·op(B) + bias is kept here, and C = gelu(z) (rows ldc apart)
  const float* gelu_input = nullptr;  // C = α·op(A)·op(B) ⊙ gelu'(gelu_input): GELU's backward (rows ldc apart; β 0)
  float* column_sums = nullptr;       // += Σ over the rows of C as the above leave it (its bias's gradient)
  float* b_column_sums = nullptr;     // += Σ over the k rows of B (not transposed): a weight gradient's bias gradient
};

// C[m, n] = alpha · op(A) · op(B) + beta · C, all row-major; op(A) is m × k, op(B) is k × n,
// op(X) = Xᵀ when trans_x. Leading dimensions are row strides in elements.
void gemm(GemmContext& context, bool trans_a, bool trans_b, int m, int n, int k, float alpha, Operand a, int lda,
          Operand b, int ldb, float beta, float* c, int ldc, const Epilogue& epilogue = {});

// `batches` independent products of the shape above; product i reads a + i·stride_a and
// b + i·stride_b and writes c + i·stride_c (strides in elements). Attention's heads are such a batch.
void gemm_strided_batched(GemmContext& context, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                          const float* a, int lda, long stride_a, const float* b, int ldb, long stride_b, float beta,
                          float* c, int ldc, long stride_c, int batches);

struct BlasInfo {
  std::string library;  // e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." or "cuBLAS 13.0.0, TF32 tensor cores"
  std::string core;     // kernel family or device in use, e.g. "Haswell" or "NVIDIA H200 (sm_90)"
  int threads = 1;
  std::string core_note;  // why that core, where trident chose it (kernels/blas_core.hpp); else empty
};
BlasInfo blas_info();

// Best GFLOP/s reached by a few square gemm() (n = 1024 … 2048) at `precision` in about a second:
// the reference that MFU is reported against.
double measure_gemm_peak_gflops(MatmulPrecision precision = MatmulPrecision::automatic);

// A product's cost (kernels/profile.hpp), declared by gemm() and gemm_strided_batched(): per matrix,
// A and B read once (as bf16 under bf16), C written (and read where β ≠ 0), 2·m·n·k operations.
inline KernelCost product_cost(const GemmContext& context, int m, int n, int k, float beta, int batches = 1) {
  const double operand = context.precision() == MatmulPrecision::bf16 ? 0.5 : 1.0;
  const double elements = operand * (static_cast<double>(m) * k + static_cast<double>(k) * n) +
                          static_cast<double>(m) * n * (beta != 0.0f ? 2.0 : 1.0);
  return KernelCost::of_floats(batches * elements, 0.0, 2.0 * batches * m * n * static_cast<double>(k));
}

}  // namespace trident
