// Benchmark: pipeline messages between two ranks through trident's Comm, as the executor sends
// them (comm/comm.hpp): rank 0 sends activation-sized messages to rank 1, the receives posted
// ahead; then both directions at once, as 1F1B's steady state moves activations forward and
// gradients back. The CPU build runs it over MPI, tagged (parallel.p2p = "mpi") and ordered (the
// direction as tag, "ordered"); the GPU build over NCCL's pipeline channels ("nccl",
// comm/nccl_pipeline_comm.hpp), device buffers. Every message is checked. Prints, per message size,
// the median time of a batch of messages and GB/s of one direction (bytes moved one way / time),
// the figure nccl-tests' sendrecv_perf calls algbw: compare it with that tool on the same pair.
//   mpirun -n 2 --bind-to core build/cpu/bench/pipeline_p2p [--messages N] [--repeats N] [--mib N ...]
//   srun -n 2 --gpus-per-task 1 build/cuda/bench/pipeline_p2p --mib 16 64 256   (one GPU per rank)
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "comm/mpi_comm.hpp"
#include "kernels/device.hpp"
#ifdef KOKKOS_ENABLE_CUDA
#include "comm/nccl_pipeline_comm.hpp"
#include "gpu/device_selection.hpp"
#endif

namespace trident {
namespace {

struct Options {
  int messages = 8;  // per batch, all receives posted before the first send (the executor posts a few)
  int repeats = 7;
  std::vector<double> mib = {1, 4, 16, 64};
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--messages" && i + 1 < argc) {
      options.messages = std::atoi(argv[++i]);
    } else if (arg == "--repeats" && i + 1 < argc) {
      options.repeats = std::atoi(argv[++i]);
    } else if (arg == "--mib") {
      options.mib.clear();
      while (i + 1 < argc && argv[i + 1][0] != '-') options.mib.push_back(std::atof(argv[++i]));
    } else {
      std::fprintf(stderr, "pipeline_p2p: unknown argument '%s'\n", arg.c_str());
      std::exit(2);
    }
  }
  return options;
}

// One batch: `messages` messages each way the pattern sends, every receive posted first. The tag
// is the direction under ordered matching (0 forward, 1 back), the message's index otherwise.
double batch(Comm& comm, bool ordered, bool both_ways, std::vector<FloatBuffer>& out, std::vector<FloatBuffer>& in) {
  const int rank = comm.rank(), peer = 1 - rank, messages = static_cast<int>(out.size());
  const bool sends = rank == 0 || both_ways, receives = rank == 1 || both_ways;
  const int direction = rank == 0 ? 0 : 1;
  std::vector<CommRequestPtr> requests;
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int k = 0; receives && k < messages; ++k)
    requests.push_back(comm.recv_async(in[k].data(), in[k].extent(0), peer, ordered ? 1 - direction : k));
  for (int k = 0; sends && k < messages; ++k)
    requests.push_back(comm.send_async(out[k].data(), out[k].extent(0), peer, ordered ? direction : k));
  for (auto& request : requests) request->wait();
  return MPI_Wtime() - start;
}

// The k-th message rank r sends holds 1000 r + k everywhere; checks what arrived.
void check(const std::vector<FloatBuffer>& in, int peer) {
  for (std::size_t k = 0; k < in.size(); ++k) {
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), in[k]);
    const float expected = static_cast<float>(1000 * peer + k);
    if (host(0) != expected || host(host.extent(0) - 1) != expected) {
      std::fprintf(stderr, "pipeline_p2p: message %zu from rank %d holds %g, not %g\n", k, peer, host(0), expected);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
}

void run(Comm& comm, const char* name, bool ordered, const Options& options) {
  const int rank = comm.rank();
  for (const double mib : options.mib) {
    const auto floats = static_cast<std::size_t>(mib * (1 << 20) / sizeof(float));
    std::vector<FloatBuffer> out, in;
    for (int k = 0; k < options.messages; ++k) {
      out.emplace_back("out", floats);
      in.emplace_back("in", floats);
      Kokkos::deep_copy(out.back(), static_cast<float>(1000 * rank + k));
    }
    for (const bool both_ways : {false, true}) {
      std::vector<double> times;
      for (int repeat = 0; repeat < options.repeats; ++repeat) {
        for (FloatBuffer& buffer : in) Kokkos::deep_copy(buffer, -1.0f);
        times.push_back(batch(comm, ordered, both_ways, out, in));
        if (rank == 1 || both_ways) check(in, 1 - rank);
      }
      std::sort(times.begin(), times.end());
      const double median = times[times.size() / 2];
      const double bytes = static_cast<double>(floats) * sizeof(float) * options.messages;
      if (rank == 0)
        std::printf("%-8s  %8.1f MiB  %-9s  %10.3f ms  %8.2f GB/s one way\n", name, mib,
                    both_ways ? "both ways" : "one way", median / options.messages * 1e3, bytes / median / 1e9);
    }
  }
}

}  // namespace
}  // namespace trident

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    std::fprintf(stderr, "pipeline_p2p: run on 2 ranks (mpirun -n 2)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const trident::Options options = trident::parse(argc, argv);
#ifdef KOKKOS_ENABLE_CUDA
  Kokkos::initialize(Kokkos::InitializationSettings().set_device_id(trident::select_device(MPI_COMM_WORLD)));
#else
  Kokkos::initialize(argc, argv);
#endif
  {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
      std::printf("pipeline_p2p: %d messages per batch, median of %d batches, receives posted first\n",
                  options.messages, options.repeats);
#ifdef KOKKOS_ENABLE_CUDA
    const auto nccl = trident::make_nccl_pipeline_comm(MPI_COMM_WORLD, trident::ExecSpace().cuda_stream());
    trident::run(*nccl, "nccl", true, options);
#else
    const auto mpi = trident::make_mpi_comm(MPI_COMM_WORLD);
    trident::run(*mpi, "mpi", false, options);
    trident::run(*mpi, "ordered", true, options);
#endif
  }
  Kokkos::finalize();
  MPI_Finalize();
  return 0;
}
