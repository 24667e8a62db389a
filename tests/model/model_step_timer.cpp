// Times forward + backward of one micro-batch (not a test): ms per step, achieved GFLOP/s and MFU
// against the sgemm peak measured in the same process, and the time spent in Kokkos kernels
// (everything but the GEMMs) by kernel name, in CPU time of the one thread that runs them.
//   model_step_timer [layers d_model heads seq_len vocab batch steps]   (default: gpt2, B = 4, 3 steps)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "kernels/gemm.hpp"
#include "model/transformer.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// Kokkos tools callbacks: CPU seconds of the calling thread per kernel label. Kernels run on that
// one thread (Serial backend), and CPU time is not inflated when other processes share the cores.
std::map<std::string, double> g_kernel_seconds;
std::vector<std::pair<std::string, double>> g_running;

double thread_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
void begin_kernel(const char* name, std::uint32_t, std::uint64_t* id) {
  *id = g_running.size();
  g_running.emplace_back(name, thread_seconds());
}
void end_kernel(std::uint64_t) {
  g_kernel_seconds[g_running.back().first] += thread_seconds() - g_running.back().second;
  g_running.pop_back();
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  trident::ModelConfig cfg;
  cfg.layers = 12, cfg.d_model = 768, cfg.heads = 12, cfg.seq_len = 256, cfg.vocab = 50304;
  int B = 4, steps = 3;
  if (argc == 8) {
    cfg.layers = std::atoi(argv[1]), cfg.d_model = std::atoi(argv[2]), cfg.heads = std::atoi(argv[3]);
    cfg.seq_len = std::atoi(argv[4]), cfg.vocab = std::atoi(argv[5]), B = std::atoi(argv[6]), steps = std::atoi(argv[7]);
  }
  const trident::BlasInfo blas = trident::blas_info();
  std::printf("BLAS: %s | core %s | %d threads | OPENBLAS_CORETYPE=%s\n", blas.library.c_str(), blas.core.c_str(),
              blas.threads, std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "(unset)");

  const std::unique_ptr<trident::Comm> no_tp = trident::make_local_comm();
  trident::Transformer model(cfg, B, 1, *no_tp);
  const int BT = B * cfg.seq_len;
  std::mt19937 rng(1);
  trident::IntBuffer inputs("inputs", BT), targets("targets", BT);
  auto hin = Kokkos::create_mirror_view(inputs), htg = Kokkos::create_mirror_view(targets);
  for (int i = 0; i < BT; ++i) hin(i) = rng() % cfg.vocab, htg(i) = rng() % cfg.vocab;
  Kokkos::deep_copy(inputs, hin);
  Kokkos::deep_copy(targets, htg);

  const double L = cfg.layers, C = cfg.d_model, T = cfg.seq_len, V = cfg.vocab;
  const double non_embedding = double(model.params().total_size()) - V * C - T * C;
  const double flops = 6 * non_embedding * BT + 6 * V * C * BT + 6 * L * B * T * T * C;

  const double peak = trident::measure_gemm_peak_gflops();
  model.zero_grads();
  model.forward(0, inputs, targets);  // warm-up: arena, BLAS buffers
  model.backward(0, 1.0f / BT);

  Kokkos::Tools::Experimental::set_begin_parallel_for_callback(begin_kernel);
  Kokkos::Tools::Experimental::set_end_parallel_for_callback(end_kernel);
  Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(begin_kernel);
  Kokkos::Tools::Experimental::set_end_parallel_reduce_callback(end_kernel);
  std::vector<double> step_ms;
  for (int s = 0; s < steps; ++s) {
    const auto t0 = Clock::now();
    model.forward(0, inputs, targets);
    const auto t1 = Clock::now();
    model.backward(0, 1.0f / BT);
    const auto t2 = Clock::now();
    step_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
    std::printf("step %d: forward %.0f ms, backward %.0f ms, total %.0f ms\n", s + 1,
                std::chrono::duration<double, std::milli>(t1 - t0).count(),
                std::chrono::duration<double, std::milli>(t2 - t1).count(), step_ms.back());
  }
  Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
  Kokkos::Tools::Experimental::set_end_parallel_for_callback(nullptr);
  Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(nullptr);
  Kokkos::Tools::Experimental::set_end_parallel_reduce_callback(nullptr);
  const double best_ms = *std::min_element(step_ms.begin(), step_ms.end());
  const double gflops = flops / (best_ms * 1e-3) * 1e-9;
  std::printf("FLOPs per step %.1f G (6·N_nonemb·BT + 6·V·C·BT + 6·L·B·T²·C, N_nonemb = %.1fM)\n", flops * 1e-9,
              non_embedding * 1e-6);
  // This machine's speed drifts by tens of percent over seconds: measure the peak again afterwards
  // and keep the better of the two, so that MFU is not flattered by a slow moment at start-up.
  const double peak_after = trident::measure_gemm_peak_gflops();
  std::printf("best %.0f ms/step, %.1f GFLOP/s, sgemm peak %.1f GFLOP/s (before %.1f, after %.1f), MFU %.1f%%\n",
              best_ms, gflops, std::max(peak, peak_after), peak, peak_after, 100.0 * gflops / std::max(peak, peak_after));
  double kernel_total = 0.0;
  for (const auto& [name, seconds] : g_kernel_seconds) kernel_total += seconds;
  std::printf("Kokkos kernels (non-GEMM): %.0f ms/step\n", kernel_total * 1e3 / steps);
  for (const auto& [name, seconds] : g_kernel_seconds) std::printf("  %-28s %7.1f ms/step\n", name.c_str(), seconds * 1e3 / steps);
  std::printf("peak activation bytes %.1f MB\n", model.peak_activation_bytes() / 1e6);
}
