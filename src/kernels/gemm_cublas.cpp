// gemm.hpp on the GPU: cuBLAS on the stream Kokkos' kernels run on, so products and kernels stay
// in order without fences; each GemmContext has its own handle. The precision (kernels/matmul_precision.hpp): fp32 and
// TF32 are cuBLAS compute types on the fp32 operands; bf16 multiplies bf16 copies of them, made on the same stream.
#include <cstdint>
#include <memory>
#include <string>

#include "common/env_switch.hpp"
#include "gpu/cublas_gemm.hpp"
#include "gpu/cublaslt_gemm.hpp"
#include "gpu/cuda_check.hpp"
#include "kernels/device.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_epilogue.hpp"
#include "kernels/matmul_precision.hpp"
#include "kernels/profile.hpp"

namespace trident {

// The cuBLAS handle (on the stream Kokkos' kernels run on) and the bf16 operand copies; and
// cuBLASLt with the epilogues fused into the products, the default since a GPU check showed it equal
// to the CPU build (bench/README "GPU runs"), unless TRIDENT_FUSED_EPILOGUES=0 asks for the
// epilogues' own kernels around cuBLAS.
struct GemmContext::Library {
  CublasGemm cublas{ExecSpace().cuda_stream()};
  OperandScratch scratch;
  EpilogueScratch epilogue;
  std::unique_ptr<CublasLtGemm> fused = fused_epilogues_on() ? std::make_unique<CublasLtGemm>(ExecSpace().cuda_stream())
                                                             : nullptr;
  static bool fused_epilogues_on() { return !environment_says("TRIDENT_FUSED_EPILOGUES", "0"); }
};

GemmContext::GemmContext(MatmulPrecision precision)
    : precision_(resolve_matmul_precision(precision)), library_(std::make_unique<Library>()) {}

GemmContext::~GemmContext() = default;

namespace {

GemmMath fp32_math(const GemmContext& context) {
  return context.precision() == MatmulPrecision::fp32 ? GemmMath::fp32 : GemmMath::tf32;
}

// Two elements' bf16 bits in one word, the first in the low half (memory order).
KOKKOS_INLINE_FUNCTION unsigned bf16_pair(float first, float second) {
  return static_cast<unsigned>(bf16_bits(first)) | static_cast<unsigned>(bf16_bits(second)) << 16;
}

// out[0, n) = x[0, n) as bf16 bits, in one launch: eight elements a thread, read and written 16
// bytes at a time where both are 16-byte aligned (a scalar launch ran at a fifth of the memory's
// bandwidth on an H200), the rest one at a time.
void round_to_bf16(std::uint16_t* out, const float* x, long n) {
  const bool aligned = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  const long groups = aligned ? n / 8 : 0, rest = n - 8 * groups;
  declare_kernel_cost(KernelCost::of_floats(n, 0.5 * n, n));
  Kokkos::parallel_for("bf16_operand", Kokkos::RangePolicy<ExecSpace>(0, groups + rest), KOKKOS_LAMBDA(long i) {
    if (i < groups) {
      const float4 a = reinterpret_cast<const float4*>(x)[2 * i], b = reinterpret_cast<const float4*>(x)[2 * i + 1];
      reinterpret_cast<uint4*>(out)[i] =
          make_uint4(bf16_pair(a.x, a.y), bf16_pair(a.z, a.w), bf16_pair(b.x, b.y), bf16_pair(b.z, b.w));
    } else {
      const long j = 8 * groups + (i - groups);
      out[j] = bf16_bits(x[j]);
    }
  });
}

// x[0, n) as bf16 (rounded to nearest, ties to even): itself where it is stored so (a ProductInput),
// the kept copy where x lies in its buffer (the weights), else a copy made in operand scratch `slot`.
const __nv_bfloat16* bf16_operand(GemmContext& context, int slot, Operand x, long n) {
  if (x.bf16) return reinterpret_cast<const __nv_bfloat16*>(x.bf16);
  if (const std::uint16_t* kept = context.kept_bf16(x.fp32, n)) return reinterpret_cast<const __nv_bfloat16*>(kept);
  return reinterpret_cast<const __nv_bfloat16*>(bf16_copy_in_scratch(context, slot, x.fp32, n));
}

bool has_epilogue(const Epilogue& e) {
  return e.bias || e.pre_gelu || e.gelu_input || e.column_sums || e.b_column_sums;
}

// The product with its epilogue on cuBLASLt, where asked for and where cuBLASLt can fuse it (a
// bias gradient of B only from fp32 inputs: the CPU build sums B unrounded). Returns whether it ran.
bool fused_gemm(GemmContext& context, bool trans_a, bool trans_b, int m, int n, int k, float alpha, Operand a, int lda,
                Operand b, int ldb, float beta, float* c, int ldc, const Epilogue& e) {
  CublasLtGemm* fused = context.library().fused.get();
  if (!fused || !has_epilogue(e)) return false;
  const FusedEpilogue fusion{e.bias, e.pre_gelu, e.gelu_input, e.column_sums, e.b_column_sums};
  if (context.precision() != MatmulPrecision::bf16)
    return fused->gemm(trans_a, trans_b, m, n, k, alpha, a.fp32_values(), lda, b.fp32_values(), ldb, CUDA_R_32F,
                       context.precision() == MatmulPrecision::fp32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32,
                       beta, c, ldc, fusion);
  if (e.b_column_sums) return false;
  const __nv_bfloat16* a16 = bf16_operand(context, 0, a, operand_extent(trans_a ? k : m, trans_a ? m : k, lda));
  const __nv_bfloat16* b16 = bf16_operand(context, 1, b, operand_extent(trans_b ? n : k, trans_b ? k : n, ldb));
  return fused->gemm(trans_a, trans_b, m, n, k, alpha, a16, lda, b16, ldb, CUDA_R_16BF, CUBLAS_COMPUTE_32F, beta, c,
                     ldc, fusion);
}

}  // namespace

const std::uint16_t* bf16_copy_in_scratch(GemmContext& context, int slot, const float* x, long n) {
  std::uint16_t* bits = context.library().scratch.halves(slot, n);
  round_to_bf16(bits, x, n);
  return bits;
}

void gemm(GemmContext& context, bool trans_a, bool trans_b, int m, int n, int k, float alpha, Operand a, int lda,
          Operand b, int ldb, float beta, float* c, int ldc, const Epilogue& epilogue) {
  declare_kernel_cost(product_cost(context, m, n, k, beta));
  const ProfileRegion product(kProductRegion);
  if (fused_gemm(context, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epilogue)) return;
  CublasGemm& cublas = context.library().cublas;
  beta = prepare_epilogue(epilogue, beta, trans_b, b, c, m, n, ldc);
  if (context.precision() != MatmulPrecision::bf16) {
    cublas.gemm(trans_a, trans_b, m, n, k, alpha, a.fp32_values(), lda, b.fp32_values(), ldb, beta, c, ldc,
                fp32_math(context));
  } else {
    const __nv_bfloat16* a16 = bf16_operand(context, 0, a, operand_extent(trans_a ? k : m, trans_a ? m : k, lda));
    const __nv_bfloat16* b16 = bf16_operand(context, 1, b, operand_extent(trans_b ? n : k, trans_b ? k : n, ldb));
    cublas.gemm(trans_a, trans_b, m, n, k, alpha, a16, lda, b16, ldb, beta, c, ldc);
  }
  finish_epilogue(epilogue, c, m, n, ldc, b.fp32, ldb, k, context.library().epilogue);
}

void gemm_strided_batched(GemmContext& context, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                          const float* a, int lda, long stride_a, const float* b, int ldb, long stride_b, float beta,
                          float* c, int ldc, long stride_c, int batches) {
  declare_kernel_cost(product_cost(context, m, n, k, beta, batches));
  const ProfileRegion product(kProductRegion);
  CublasGemm& cublas = context.library().cublas;
  if (context.precision() != MatmulPrecision::bf16) {
    cublas.gemm_strided_batched(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                                stride_c, batches, fp32_math(context));
    return;
  }
  const __nv_bfloat16* a16 =
      bf16_operand(context, 0, a, operand_extent(trans_a ? k : m, trans_a ? m : k, lda, batches, stride_a));
  const __nv_bfloat16* b16 =
      bf16_operand(context, 1, b, operand_extent(trans_b ? n : k, trans_b ? k : n, ldb, batches, stride_b));
  cublas.gemm_strided_batched(trans_a, trans_b, m, n, k, alpha, a16, lda, stride_a, b16, ldb, stride_b, beta, c, ldc,
                              stride_c, batches);
}

BlasInfo blas_info() {
  int version = 0, device = 0;
  TRIDENT_GPU_CHECK(cublasGetProperty(MAJOR_VERSION, &version));
  int minor = 0, patch = 0;
  TRIDENT_GPU_CHECK(cublasGetProperty(MINOR_VERSION, &minor));
  TRIDENT_GPU_CHECK(cublasGetProperty(PATCH_LEVEL, &patch));
  TRIDENT_GPU_CHECK(cudaGetDevice(&device));
  cudaDeviceProp properties{};
  TRIDENT_GPU_CHECK(cudaGetDeviceProperties(&properties, device));
  return {"cuBLAS " + std::to_string(version) + "." + std::to_string(minor) + "." + std::to_string(patch),
          std::string(properties.name) + " (sm_" + std::to_string(properties.major) +
              std::to_string(properties.minor) + ", device " + std::to_string(device) + ")",
          1, ""};
}

}  // namespace trident
