// Benchmark: Open MPI's non-blocking all-reduce algorithms on the messages trident sends
// (comm/mpi_tuning.hpp chooses one). In-place MPI_Iallreduce + MPI_Wait of float buffers, as the
// tensor-parallel all-reduces and the data-parallel gradient buckets are, with the algorithm
// switched between calls through the MPI tool interface: every iteration times each algorithm
// once, in turn, so that the machine's drift hits all of them alike. A barrier before each call
// keeps the ranks' arrival skew out of the figure; the buffers rotate through more memory than the
// caches hold and are rewritten before each call, as backward writes gradients. Every result is
// checked. Prints the median time per call, GB/s of the buffer, and the ratio to Open MPI's own
// choice (algorithm 0), measured in the same run.
//   mpirun -n 2 --bind-to core build/cpu/bench/mpi_allreduce [--iterations N] [--floats N ...]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Algorithm {
  int value;  // coll_libnbc_iallreduce_algorithm; kBlocking: the blocking MPI_Allreduce instead
  const char* name;
};
constexpr int kBlocking = -1;
const Algorithm kAlgorithms[] = {
    {0, "Open MPI's choice"}, {1, "ring"}, {3, "Rabenseifner"}, {kBlocking, "blocking Allreduce"}};

// One in-place all-reduce of `floats` floats, the way `algorithm` runs it.
void all_reduce(const Algorithm& algorithm, float* data, long floats) {
  if (algorithm.value == kBlocking) {
    MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(floats), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return;
  }
  MPI_Request request;
  MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(floats), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "mpi_allreduce: %s\n", what.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

class AlgorithmSwitch {
 public:
  AlgorithmSwitch() {
    int provided = 0, index = 0, count = 0;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) != MPI_SUCCESS)
      fail("this MPI has no coll_libnbc_iallreduce_algorithm (the benchmark is for Open MPI)");
    MPI_T_cvar_handle_alloc(index, nullptr, &handle_, &count);
  }
  ~AlgorithmSwitch() {
    MPI_T_cvar_handle_free(&handle_);
    MPI_T_finalize();
  }
  void set(int value) {
    if (MPI_T_cvar_write(handle_, &value) != MPI_SUCCESS) fail("cannot set coll_libnbc_iallreduce_algorithm");
  }

 private:
  MPI_T_cvar_handle handle_;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

void benchmark(int rank, int size, int iterations, const std::vector<long>& sizes) {
  AlgorithmSwitch algorithm;
  constexpr long kRotation = 64L << 20;  // floats cycled through: 256 MiB, beyond any cache
  std::vector<float> memory(kRotation + *std::max_element(sizes.begin(), sizes.end()));
  if (rank == 0)
    std::printf("in-place MPI_Iallreduce + MPI_Wait under each libnbc algorithm, and the blocking MPI_Allreduce\n"
                "(coll_tuned's choice), on %d ranks, %d iterations, median per call\n"
                "%12s  %-20s %10s %8s %22s\n",
                size, iterations, "floats", "algorithm", "ms", "GB/s", "speed-up vs Open MPI's");
  long offset = 0;
  for (const long floats : sizes) {
    std::vector<std::vector<double>> seconds(std::size(kAlgorithms));
    for (int it = 0; it < iterations + 1; ++it) {  // the first iteration warms up
      for (std::size_t a = 0; a < std::size(kAlgorithms); ++a) {
        offset = (offset + floats) % kRotation;
        float* data = memory.data() + offset;
        for (long i = 0; i < floats; ++i) data[i] = static_cast<float>((i % 1024) * (rank + 1));
        if (kAlgorithms[a].value != kBlocking) algorithm.set(kAlgorithms[a].value);
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = MPI_Wtime();
        all_reduce(kAlgorithms[a], data, floats);
        const double elapsed = MPI_Wtime() - start;
        const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
        for (long i = 0; i < floats; ++i)
          if (data[i] != static_cast<float>(i % 1024) * ranks_sum) fail(std::string(kAlgorithms[a].name) + " summed wrong");
        if (it > 0) seconds[a].push_back(elapsed);
      }
    }
    // the slowest rank's time for each call decides
    for (auto& s : seconds) MPI_Allreduce(MPI_IN_PLACE, s.data(), static_cast<int>(s.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const double reference = median(seconds[0]);
    for (std::size_t a = 0; a < std::size(kAlgorithms) && rank == 0; ++a) {
      const double t = median(seconds[a]);
      std::printf("%12ld  %-20s %10.3f %8.2f %21.2fx\n", floats, kAlgorithms[a].name, 1e3 * t,
                  floats * sizeof(float) / t / 1e9, reference / t);
    }
  }
  algorithm.set(0);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int iterations = 40;
  // small's B·T·C (each TP all-reduce), the benchmark's 4 MiB bucket, the default 25 MiB bucket
  std::vector<long> sizes = {8L * 256 * 384, 1L << 20, 25L << 18};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iterations") && i + 1 < argc) {
      iterations = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--floats") && i + 1 < argc) {
      sizes.clear();
      while (i + 1 < argc && argv[i + 1][0] != '-') sizes.push_back(std::atol(argv[++i]));
    } else {
      if (rank == 0) std::fprintf(stderr, "usage: mpi_allreduce [--iterations N] [--floats N ...]\n");
      MPI_Finalize();
      return 2;
    }
  }
  if (iterations < 1 || sizes.empty() || *std::min_element(sizes.begin(), sizes.end()) < 1) fail("--iterations and --floats need positive values");

  benchmark(rank, size, iterations, sizes);
  MPI_Finalize();
  return 0;
}
