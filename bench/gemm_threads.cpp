// A training step's matrix products with the BLAS on one thread and on N (issue 19): does the BLAS's
// own threading of one rank's products lose against one thread per rank? For each product of a
// GPT-2 block and the tied vocabulary head (forward, input gradient, weight gradient: the shapes and
// transposes trident's linear layers pass), the best of --repeats timings at each thread count, the
// GFLOP/s, and the ratio N threads / 1 thread measured in the same run; then a step's products
// together (each block's once per layer, the head's once). Attention's own small products are left out
// (bench/attention_kernels times them).
//
//   build/cpu/bench/gemm_threads [--threads N] [--repeats N] [--rows B·T] [--d-model C] [--vocab V] [--layers L]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/blas_core.hpp"

namespace {

struct Product {
  std::string name;
  bool trans_a, trans_b;
  int m, n, k;
  int per_step;  // calls in one step: once per layer, the head once
  double flops() const { return 2.0 * m * n * static_cast<double>(k); }
};

struct Options {
  int threads = 2, repeats = 5, rows = 1024, d_model = 768, vocab = 50304, layers = 12;
};

// y = x·Wᵀ, dx = dy·W, dW = dyᵀ·x for a linear layer of `in` → `out` features over `rows` tokens.
void add_linear(std::vector<Product>& products, const std::string& name, int rows, int in, int out, int per_step) {
  products.push_back({name + " forward", false, true, rows, out, in, per_step});
  products.push_back({name + " input gradient", false, false, rows, in, out, per_step});
  products.push_back({name + " weight gradient", true, false, out, in, rows, per_step});
}

std::vector<Product> step_products(const Options& o) {
  std::vector<Product> products;
  add_linear(products, "qkv", o.rows, o.d_model, 3 * o.d_model, o.layers);
  add_linear(products, "attention projection", o.rows, o.d_model, o.d_model, o.layers);
  add_linear(products, "mlp up", o.rows, o.d_model, 4 * o.d_model, o.layers);
  add_linear(products, "mlp down", o.rows, 4 * o.d_model, o.d_model, o.layers);
  add_linear(products, "vocabulary head", o.rows, o.d_model, o.vocab, 1);
  return products;
}

double best_seconds(const Product& p, int threads, int repeats, std::vector<float>& a, std::vector<float>& b,
                    std::vector<float>& c) {
  openblas_set_num_threads(threads);
  const int lda = p.trans_a ? p.m : p.k, ldb = p.trans_b ? p.k : p.n;
  double best = 1e30;
  for (int r = 0; r <= repeats; ++r) {  // the first call warms caches and the thread pool
    const auto start = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, p.trans_a ? CblasTrans : CblasNoTrans, p.trans_b ? CblasTrans : CblasNoTrans, p.m, p.n,
                p.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), p.n);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) best = std::min(best, seconds);
  }
  return best;
}

int parse_int(const char* flag, const char* value) {
  char* end = nullptr;
  const long parsed = value ? std::strtol(value, &end, 10) : 0;
  if (!value || *end != '\0' || parsed < 1 || parsed > (1L << 24)) {
    std::fprintf(stderr, "gemm_threads: %s wants a positive integer, got '%s'\n", flag, value ? value : "");
    std::exit(2);
  }
  return static_cast<int>(parsed);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (flag == "--threads")
      o.threads = parse_int(argv[i], value);
    else if (flag == "--repeats")
      o.repeats = parse_int(argv[i], value);
    else if (flag == "--rows")
      o.rows = parse_int(argv[i], value);
    else if (flag == "--d-model")
      o.d_model = parse_int(argv[i], value);
    else if (flag == "--vocab")
      o.vocab = parse_int(argv[i], value);
    else if (flag == "--layers")
      o.layers = parse_int(argv[i], value);
    else {
      std::fprintf(
          stderr,
          "usage: gemm_threads [--threads N] [--repeats N] [--rows B·T] [--d-model C] [--vocab V] [--layers L]\n");
      std::exit(flag == "--help" || flag == "-h" ? 0 : 2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  trident::choose_blas_core_or_restart(argv);
  const Options o = parse(argc, argv);
  const std::vector<Product> products = step_products(o);
  std::size_t largest = 0;
  for (const Product& p : products)
    largest = std::max({largest, std::size_t(p.m) * p.k, std::size_t(p.k) * p.n, std::size_t(p.m) * p.n});
  std::vector<float> a(largest, 0.5f), b(largest, 0.25f), c(largest, 0.0f);
  std::printf("%s; rows %d, d_model %d, vocab %d; best of %d\n", trident::openblas_kernels_line().c_str(), o.rows, o.d_model, o.vocab, o.repeats);
  std::printf("%-36s %6s %6s %6s %12s %12s %8s\n", "product", "m", "n", "k", "1 thread", "N threads", "ratio");
  double flops = 0.0, one_total = 0.0, many_total = 0.0;
  for (const Product& p : products) {
    const double one = best_seconds(p, 1, o.repeats, a, b, c);
    const double many = best_seconds(p, o.threads, o.repeats, a, b, c);
    flops += p.per_step * p.flops();
    one_total += p.per_step * one;
    many_total += p.per_step * many;
    std::printf("%-36s %6d %6d %6d %7.1f GF/s %7.1f GF/s %8.2f\n", p.name.c_str(), p.m, p.n, p.k, p.flops() / one / 1e9,
                p.flops() / many / 1e9, one / many);
  }
  std::printf(
      "a step's products (blocks × %d layers, head once): 1 thread %.1f GFLOP/s, %d threads %.1f GFLOP/s, ratio %.2f "
      "(ideal %d)\n",
      o.layers, flops / one_total / 1e9, o.threads, flops / many_total / 1e9, one_total / many_total, o.threads);
  return 0;
}
