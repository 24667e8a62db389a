// Benchmark: context parallelism's ring attention (model/ring_attention.hpp) against the same
// sequence's attention on one rank, measured in the same run. First rank 0 alone runs the tiled
// kernel over the whole sequence (forward + backward, the other ranks wait); then every rank runs
// the ring over its two chunks. Prints the medians, the ring's time as the slowest rank's, the
// speed-up whole / ring (the ideal is the rank count: each rank has 1/cp of the causal work), and
// what the ring takes beyond that ideal share: the hops it does not hide and the smaller products
// of chunk pairs.
//
//   mpirun -n 2 --bind-to none build/cpu/bench/ring_attention [--seq T] [--heads H] [--kv-heads KV]
//          [--head-dim D] [--batch B] [--repeats N]
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/mpi_comm.hpp"
#include "kernels/attention.hpp"
#include "kernels/blas_core.hpp"
#include "model/ring_attention.hpp"
#include "random_buffers.hpp"

namespace {

using trident::AttentionShape;
using trident::FloatBuffer;
using trident::bench::filled;
using trident::bench::median;

// Median milliseconds of `repeats` runs of `run` (after one to warm up), on this rank.
template <class Run>
double time_ms(int repeats, const Run& run) {
  std::vector<double> times;
  for (int r = 0; r <= repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    Kokkos::fence();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) times.push_back(ms);
  }
  return median(times);
}

struct Options {
  int seq = 4096, heads = 12, kv_heads = 12, head_dim = 64, batch = 1, repeats = 3;
};

// Forward + backward of `shape`'s attention on this rank alone.
double whole_sequence_ms(const AttentionShape& shape, int repeats) {
  const std::size_t rows = std::size_t(shape.B) * shape.T;
  const FloatBuffer q = filled(rows * shape.q_ld, 1), k = filled(rows * shape.kv_ld, 2);
  const FloatBuffer v = filled(rows * shape.kv_ld, 3), dout = filled(rows * shape.out_ld, 4);
  FloatBuffer out("out", rows * shape.out_ld), saved("saved", trident::attention_saved_floats(shape)),
      scratch("scratch", trident::attention_scratch_floats(shape)), dq("dq", rows * shape.q_ld),
      dk("dk", rows * shape.kv_ld), dv("dv", rows * shape.kv_ld);
  trident::GemmContext gemm;
  return time_ms(repeats, [&] {
    trident::attention_forward(gemm, out.data(), saved.data(), scratch.data(), q.data(), k.data(), v.data(), shape);
    trident::attention_backward(gemm, dq.data(), dk.data(), dv.data(), scratch.data(), dout.data(), q.data(), k.data(),
                                v.data(), out.data(), saved.data(), shape);
  });
}

// Forward + backward of the ring over the group, this rank's two chunks of shape.T / (2·cp).
double ring_ms(trident::Comm& cp, AttentionShape local, int repeats) {
  local.T = local.T / cp.size();  // two chunks of T / (2·cp)
  const std::size_t rows = std::size_t(local.B) * local.T;
  const FloatBuffer q = filled(rows * local.q_ld, 11), k = filled(rows * local.kv_ld, 12),
                    v = filled(rows * local.kv_ld, 13), dout = filled(rows * local.out_ld, 14);
  trident::RingAttention ring(cp, local);
  FloatBuffer out("out", rows * local.out_ld), saved("saved", ring.saved_floats()), dq("dq", rows * local.q_ld),
      dk("dk", rows * local.kv_ld), dv("dv", rows * local.kv_ld);
  trident::GemmContext gemm;
  return time_ms(repeats, [&] {
    ring.forward(gemm, out.data(), saved.data(), q.data(), k.data(), v.data(), local);
    ring.backward(gemm, dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(),
                  saved.data(), local);
  });
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    int* field = !std::strcmp(argv[i], "--seq")        ? &o.seq
                 : !std::strcmp(argv[i], "--heads")    ? &o.heads
                 : !std::strcmp(argv[i], "--kv-heads") ? &o.kv_heads
                 : !std::strcmp(argv[i], "--head-dim") ? &o.head_dim
                 : !std::strcmp(argv[i], "--batch")    ? &o.batch
                 : !std::strcmp(argv[i], "--repeats")  ? &o.repeats
                                                       : nullptr;
    if (!field || i + 1 >= argc || (*field = std::atoi(argv[++i])) < 1) return false;
  }
  return o.heads % o.kv_heads == 0;
}

}  // namespace

int main(int argc, char** argv) {
  trident::choose_blas_core_or_restart(argv);
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  Options o;
  if (!parse(argc, argv, o) || o.seq % (2 * ranks) != 0) {
    if (rank == 0)
      std::fprintf(stderr, "usage: mpirun -n CP ring_attention [--seq T (a multiple of 2·CP)] [--heads H] "
                           "[--kv-heads KV dividing H] [--head-dim D] [--batch B] [--repeats N]\n");
    MPI_Finalize();
    return 2;
  }
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    const long q_ld = long{o.heads} * o.head_dim, kv_ld = long{o.kv_heads} * o.head_dim;
    const AttentionShape whole{o.batch, o.seq, o.heads, o.kv_heads, o.head_dim, q_ld, kv_ld, q_ld};
    double whole_ms = 0.0;
    if (rank == 0) whole_ms = whole_sequence_ms(whole, o.repeats);
    MPI_Barrier(MPI_COMM_WORLD);
    const std::unique_ptr<trident::Comm> cp = trident::make_mpi_comm(MPI_COMM_WORLD, "cp");
    double mine = ring_ms(*cp, whole, o.repeats), slowest = 0.0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      const trident::BlasInfo blas = trident::blas_info();
      std::printf("BLAS core %s, %d thread(s) per rank; B %d, T %d, %d heads (%d kv) of %d; medians of %d\n",
                  blas.core.c_str(), blas.threads, o.batch, o.seq, o.heads, o.kv_heads, o.head_dim, o.repeats);
      std::printf("whole sequence on one rank  %9.1f ms (forward + backward)\n", whole_ms);
      std::printf("ring over cp = %d            %9.1f ms (slowest rank)\n", ranks, slowest);
      std::printf("speed-up whole / ring        %9.2f (ideal %d)\n", whole_ms / slowest, ranks);
      std::printf("beyond the ideal share       %9.1f ms (ring − whole / cp: hops and per-pair overheads)\n",
                  slowest - whole_ms / ranks);
    }
  }
  MPI_Finalize();
  return 0;
}
