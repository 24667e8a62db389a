// Attention kernels alone (issue 19, item 3): forward + backward of one layer's attention with the
// tiled and the explicit kernel, GPT-2 124M's heads (12 × 64) at T = 256 (B = 4) and T = 1024
// (B = 1) by default, the medians of --repeats timings, and the ratio explicit / tiled measured in
// the same run. Threads: the BLAS's own (OPENBLAS_NUM_THREADS); the row kernels run on one.
// With --documents N the tiled kernel also runs with packed documents of N positions each
// (data.document_mask), and the ratio whole sequence / documents says what the skipped tiles save.
//
//   build/cpu/bench/attention_kernels [--repeats N] [--documents N] [--shape B,T,heads,kv_heads,head_dim ...]
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/blas_core.hpp"
#include "kernels/device.hpp"
#include "random_buffers.hpp"

namespace {

using trident::AttentionKernel;
using trident::AttentionShape;
using trident::FloatBuffer;
using trident::bench::filled;
using trident::bench::median;

struct Timing {
  double forward_ms, backward_ms;
};

Timing time_kernel(AttentionShape shape, AttentionKernel kernel, int repeats) {
  shape.kernel = kernel;
  const std::size_t q = std::size_t(shape.B) * shape.T * shape.q_ld, kv = std::size_t(shape.B) * shape.T * shape.kv_ld;
  const std::size_t out_floats = std::size_t(shape.B) * shape.T * shape.out_ld;
  const FloatBuffer queries = filled(q, 1), keys = filled(kv, 2), values = filled(kv, 3), dout = filled(out_floats, 4);
  FloatBuffer out("out", out_floats), saved("saved", trident::attention_saved_floats(shape)),
      scratch("scratch", trident::attention_scratch_floats(shape)), dq("dq", q), dk("dk", kv), dv("dv", kv);
  trident::GemmContext gemm;
  using Clock = std::chrono::steady_clock;
  std::vector<double> forward, backward;
  for (int r = 0; r <= repeats; ++r) {  // the first run warms the caches and the BLAS
    const auto start = Clock::now();
    trident::attention_forward(gemm, out.data(), saved.data(), scratch.data(), queries.data(), keys.data(),
                               values.data(), shape);
    Kokkos::fence();
    const auto middle = Clock::now();
    trident::attention_backward(gemm, dq.data(), dk.data(), dv.data(), scratch.data(), dout.data(), queries.data(),
                                keys.data(), values.data(), out.data(), saved.data(), shape);
    Kokkos::fence();
    const auto end = Clock::now();
    if (r == 0) continue;
    forward.push_back(std::chrono::duration<double, std::milli>(middle - start).count());
    backward.push_back(std::chrono::duration<double, std::milli>(end - middle).count());
  }
  return {median(forward), median(backward)};
}

AttentionShape parse_shape(const char* text) {
  int B, T, heads, kv_heads, head_dim;
  if (std::sscanf(text, "%d,%d,%d,%d,%d", &B, &T, &heads, &kv_heads, &head_dim) != 5) {
    std::fprintf(stderr, "attention_kernels: --shape wants B,T,heads,kv_heads,head_dim, got '%s'\n", text);
    std::exit(2);
  }
  const long q_ld = long{heads} * head_dim, kv_ld = long{kv_heads} * head_dim;
  return {B, T, heads, kv_heads, head_dim, q_ld, kv_ld, q_ld, AttentionKernel::tiled};
}

// Every sequence cut into documents of `length` positions: each token's document start.
std::vector<int> document_starts(const AttentionShape& shape, int length) {
  std::vector<int> starts(std::size_t(shape.B) * shape.T);
  for (std::size_t i = 0; i < starts.size(); ++i) starts[i] = int(i % shape.T) / length * length;
  return starts;
}

void print_documents(const AttentionShape& shape, int length, int repeats, const Timing& whole) {
  const std::vector<int> starts = document_starts(shape, length);
  trident::IntBuffer device("starts", starts.size());
  Kokkos::deep_copy(device, Kokkos::View<const int*, Kokkos::HostSpace>(starts.data(), starts.size()));
  AttentionShape masked = shape;
  masked.documents = {device.data(), starts.data()};
  const Timing documents = time_kernel(masked, AttentionKernel::tiled, repeats);
  std::printf("%-22s %9.2f ms %9.2f ms   documents of %d: whole sequence / documents %.2f\n", "", documents.forward_ms,
              documents.backward_ms, length,
              (whole.forward_ms + whole.backward_ms) / (documents.forward_ms + documents.backward_ms));
}

}  // namespace

int main(int argc, char** argv) {
  trident::choose_blas_core_or_restart(argv);
  Kokkos::ScopeGuard kokkos(argc, argv);
  int repeats = 5, document_length = 0;
  std::vector<AttentionShape> shapes;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--documents") && i + 1 < argc) {
      document_length = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) {
      shapes.push_back(parse_shape(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: attention_kernels [--repeats N] [--documents N] [--shape B,T,heads,kv_heads,head_dim ...]\n");
      return 2;
    }
  }
  if (shapes.empty()) shapes = {parse_shape("4,256,12,12,64"), parse_shape("1,1024,12,12,64")};
  const trident::BlasInfo blas = trident::blas_info();
  std::printf("BLAS %s, core %s, %d threads; medians of %d\n", blas.library.c_str(), blas.core.c_str(), blas.threads,
              repeats);
  std::printf("%-22s %12s %12s %12s %12s %10s\n", "B,T,heads,kv,hd", "tiled fwd", "tiled bwd", "explicit fwd",
              "explicit bwd", "expl/tiled");
  for (const AttentionShape& shape : shapes) {
    const Timing tiled = time_kernel(shape, AttentionKernel::tiled, repeats);
    const Timing explicit_ = time_kernel(shape, AttentionKernel::explicit_probabilities, repeats);
    const std::string name = std::to_string(shape.B) + "," + std::to_string(shape.T) + "," +
                             std::to_string(shape.heads) + "," + std::to_string(shape.kv_heads) + "," +
                             std::to_string(shape.head_dim);
    std::printf("%-22s %9.2f ms %9.2f ms %9.2f ms %9.2f ms %10.3f\n", name.c_str(), tiled.forward_ms, tiled.backward_ms,
                explicit_.forward_ms, explicit_.backward_ms,
                (explicit_.forward_ms + explicit_.backward_ms) / (tiled.forward_ms + tiled.backward_ms));
    if (document_length > 0) print_documents(shape, document_length, repeats, tiled);
  }
}
