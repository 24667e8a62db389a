#include "gpu/cublaslt_gemm.hpp"

#include "gpu/cuda_check.hpp"

namespace trident {

namespace {

constexpr std::size_t kWorkspaceBytes = 32u << 20;  // what cuBLASLt's faster algorithms ask for on Hopper

// The largest power of two (at most 256, cuBLASLt's largest preference) dividing both the address
// and a row's bytes: every row of the matrix starts so aligned.
int alignment(const void* pointer, long row_bytes) {
  const auto bits = reinterpret_cast<std::uintptr_t>(pointer) | static_cast<std::uintptr_t>(row_bytes) | 256u;
  return static_cast<int>(bits & ~(bits - 1));
}

int element_bytes(cudaDataType type) { return type == CUDA_R_16BF ? 2 : 4; }

template <class T>
void set(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  TRIDENT_GPU_CHECK(cublasLtMatmulDescSetAttribute(op, attribute, &value, sizeof value));
}

template <class T>
void prefer(cublasLtMatmulPreference_t preference, cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
  TRIDENT_GPU_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof value));
}

// The epilogue cuBLASLt runs for `epilogue`, with the auxiliary matrix and the bias (or bias
// gradient) it reads or writes; false where it has none.
struct Fusion {
  cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  const void* aux = nullptr;
  const void* bias = nullptr;  // the bias, or where a bias gradient goes
  float* gradient = nullptr;   // the caller's bias gradient, added to
};

bool fusion_of(const FusedEpilogue& e, bool trans_b, Fusion& f) {
  if (e.b_column_sums) {
    if (e.bias || e.pre_gelu || e.gelu_input || e.column_sums || trans_b) return false;
    f.kind = CUBLASLT_EPILOGUE_BGRADA;  // row-major B is cuBLASLt's A (see gemm())
    f.gradient = e.b_column_sums;
  } else if (e.gelu_input) {
    if (e.bias || e.pre_gelu) return false;
    f.kind = e.column_sums ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
    f.aux = e.gelu_input;
    f.gradient = e.column_sums;
  } else if (e.column_sums) {
    return false;
  } else if (e.pre_gelu) {
    f.kind = e.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    f.aux = e.pre_gelu;
    f.bias = e.bias;
  } else if (e.bias) {
    f.kind = CUBLASLT_EPILOGUE_BIAS;
    f.bias = e.bias;
  }
  return true;
}

}  // namespace

struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A (row-major B), B (row-major A), C
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

CublasLtGemm::CublasLtGemm(cudaStream_t stream) : stream_(stream) {
  TRIDENT_GPU_CHECK(cublasLtCreate(&handle_));
  TRIDENT_GPU_CHECK(cublasCreate(&blas_));
  TRIDENT_GPU_CHECK(cublasSetStream(blas_, stream));
  TRIDENT_GPU_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  cudaFree(sums_);
  cudaFree(workspace_);
  cublasDestroy(blas_);
  cublasLtDestroy(handle_);
}

float* CublasLtGemm::bias_gradient_scratch(int n) {
  if (n > sums_capacity_) {
    TRIDENT_GPU_CHECK(cudaStreamSynchronize(stream_));  // a gradient being added may still read the old one
    cudaFree(sums_);
    TRIDENT_GPU_CHECK(cudaMalloc(&sums_, static_cast<std::size_t>(n) * sizeof(float)));
    sums_capacity_ = n;
  }
  return sums_;
}

// cuBLASLt is column-major, and a row-major matrix read column-major is its transpose: the row-major
// C = op(A)·op(B) is the column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, so cuBLASLt's A is the row-major B, its B
// the row-major A, its m and n our n and m. A bias per row-major column is then per cuBLASLt row, as
// its epilogues add it; BGRADA sums its A (our B) over k.
CublasLtGemm::Plan* CublasLtGemm::plan_for(const Key& key, const void* bias, const void* aux) {
  if (const auto found = plans_.find(key); found != plans_.end()) return found->second.get();
  const auto [m, n, k, trans_a, trans_b, lda, ldb, ldc, input_type, compute_type, epilogue, align_a, align_b, align_c,
              align_aux, align_bias] = key;
  (void)align_bias;  // the bias pointer set on the descriptor tells the heuristic
  const auto inputs = static_cast<cudaDataType>(input_type);
  auto plan = std::make_unique<Plan>();
  TRIDENT_GPU_CHECK(cublasLtMatmulDescCreate(&plan->op, static_cast<cublasComputeType_t>(compute_type), CUDA_R_32F));
  const cublasOperation_t op_a = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, op_a);
  set(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, op_b);
  set(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<cublasLtEpilogue_t>(epilogue));
  if (align_aux > 0) set(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, static_cast<std::int64_t>(ldc));
  if (bias) set(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (aux) set(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
  TRIDENT_GPU_CHECK(cublasLtMatrixLayoutCreate(&plan->a, inputs, op_a == CUBLAS_OP_N ? n : k,
                                               op_a == CUBLAS_OP_N ? k : n, ldb));
  TRIDENT_GPU_CHECK(cublasLtMatrixLayoutCreate(&plan->b, inputs, op_b == CUBLAS_OP_N ? k : m,
                                               op_b == CUBLAS_OP_N ? m : k, lda));
  TRIDENT_GPU_CHECK(cublasLtMatrixLayoutCreate(&plan->c, CUDA_R_32F, n, m, ldc));

  cublasLtMatmulPreference_t preference = nullptr;
  TRIDENT_GPU_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  prefer(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kWorkspaceBytes);
  prefer(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<std::uint32_t>(align_b));
  prefer(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<std::uint32_t>(align_a));
  prefer(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<std::uint32_t>(align_c));
  prefer(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<std::uint32_t>(align_c));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->a, plan->b, plan->c, plan->c,
                                                                 preference, 1, &result, &returned);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || returned == 0) plan.reset();  // not fusable here: remembered as such
  else plan->algo = result.algo;
  return (plans_[key] = std::move(plan)).get();
}

bool CublasLtGemm::gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a, int lda,
                        const void* b, int ldb, cudaDataType inputs, cublasComputeType_t compute, float beta, float* c,
                        int ldc, const FusedEpilogue& epilogue) {
  Fusion fusion;
  if (!fusion_of(epilogue, trans_b, fusion)) return false;
  if (fusion.aux && ldc % 8 != 0) return false;  // cuBLASLt's rule for the auxiliary matrix
  if (fusion.gradient) fusion.bias = bias_gradient_scratch(n);
  const int bytes = element_bytes(inputs);
  const Key key{m,
                n,
                k,
                trans_a ? 1 : 0,
                trans_b ? 1 : 0,
                lda,
                ldb,
                ldc,
                static_cast<int>(inputs),
                static_cast<int>(compute),
                static_cast<int>(fusion.kind),
                alignment(a, static_cast<long>(lda) * bytes),
                alignment(b, static_cast<long>(ldb) * bytes),
                alignment(c, static_cast<long>(ldc) * 4),
                fusion.aux ? alignment(fusion.aux, static_cast<long>(ldc) * 4) : 0,
                fusion.bias ? alignment(fusion.bias, 4) : 0};
  Plan* plan = plan_for(key, fusion.bias, fusion.aux);
  if (!plan) return false;
  // A cached plan's descriptor is reused: its pointers are this call's.
  if (fusion.bias) set(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, fusion.bias);
  if (fusion.aux) set(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, fusion.aux);
  TRIDENT_GPU_CHECK(cublasLtMatmul(handle_, plan->op, &alpha, b, plan->a, a, plan->b, &beta, c, plan->c, c, plan->c,
                                   &plan->algo, workspace_, kWorkspaceBytes, stream_));
  if (fusion.gradient) {
    const float one = 1.0f;
    TRIDENT_GPU_CHECK(cublasSaxpy(blas_, n, &one, static_cast<const float*>(fusion.bias), 1, fusion.gradient, 1));
  }
  return true;
}

}  // namespace trident
