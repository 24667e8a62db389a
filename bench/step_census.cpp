// Step census: runs two training steps of a deck and counts what the second one launches, through
// the Kokkos Tools callbacks and the regions trident names (kernels/profile.hpp): Kokkos kernels by
// label, matrix products (one gemm() or gemm_strided_batched() each: one cuBLAS call on the GPU),
// the host's waits for the device, and device allocations. Step 1 is left out: buffers that grow on
// first use (the activation arena, operand scratch) grow there. Prints one JSON object.
//   build/cpu/bench/step_census DECK [--set section.key=value ...]
//   mpirun -n N build/cpu/bench/step_census DECK ...   (grids: world rank 0's counts)
// Per layer: the kernels and products of the layers' forward, backward and weight-gradient regions,
// divided by the layer backwards run (layers on the rank × micro-batches). Kernels launched inside a
// product (an epilogue's, where the library does not fuse it: kernels/gemm_epilogue.hpp; operand
// rounding) are launches, listed under the label prefix "gemm/", and counted per layer apart from
// the others (epilogue_launches_per_layer). A host wait is a fence (wait_for_device), a
// reduction read on the host, an event waited on, or a deep copy (Kokkos' deep_copy without an
// execution space fences before and after, on the CPU build too, where it costs nothing).
#include <mpi.h>
#include <unistd.h>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "deck/deck.hpp"
#include "kernels/profile.hpp"
#include "train/trainer.hpp"
#ifdef KOKKOS_ENABLE_CUDA
#include "gpu/device_selection.hpp"
#endif

namespace trident {
namespace {

// What one step launched and waited for.
struct StepCounts {
  std::map<std::string, long> kernels;       // label (prefixed "gemm/" inside a product) → launches
  std::map<std::string, long> host_waits;    // reason → waits
  std::map<std::string, long> allocations;   // label → allocations
  long products = 0;
  long layer_kernels = 0, layer_epilogue_kernels = 0, layer_products = 0, layer_backwards = 0;
  long optimizer_kernels = 0;
};

struct Census {
  std::vector<std::string> regions;  // open regions, innermost last
  bool in_step = false;
  StepCounts current, finished;
  int steps = 0;

  bool inside(const char* name) const {
    for (const std::string& region : regions)
      if (region == name) return true;
    return false;
  }
  bool in_layer() const {
    return inside(kLayerForwardRegion) || inside(kLayerBackwardRegion) || inside(kLayerWeightGradRegion);
  }
};

Census census;

void on_push(const char* name) {
  census.regions.emplace_back(name);
  if (!census.in_step && std::strcmp(name, kStepRegion) == 0) {
    census.in_step = true;
    census.current = {};
  }
  if (!census.in_step) return;
  if (std::strcmp(name, kProductRegion) == 0) {
    census.current.products++;
    if (census.in_layer()) census.current.layer_products++;
  }
  if (std::strcmp(name, kLayerBackwardRegion) == 0) census.current.layer_backwards++;
}

void on_pop() {
  if (census.regions.empty()) return;
  if (census.in_step && census.regions.back() == kStepRegion) {
    census.in_step = false;
    census.finished = census.current;
    census.steps++;
  }
  census.regions.pop_back();
}

void on_kernel(const char* label, const std::uint32_t, std::uint64_t* id) {
  *id = 0;
  if (!census.in_step) return;
  const bool in_product = census.inside(kProductRegion);
  census.current.kernels[(in_product ? "gemm/" : "") + std::string(label)]++;
  if (census.in_layer()) (in_product ? census.current.layer_epilogue_kernels : census.current.layer_kernels)++;
  if (census.inside(kOptimizerRegion)) census.current.optimizer_kernels++;
}

void on_kernel_end(std::uint64_t) {}

void on_event(const char* name) {
  const std::size_t prefix = std::strlen(kHostWaitEvent);
  if (census.in_step && std::strncmp(name, kHostWaitEvent, prefix) == 0) census.current.host_waits[name + prefix]++;
}

void on_deep_copy(Kokkos::Tools::SpaceHandle, const char* to, const void*, Kokkos::Tools::SpaceHandle,
                  const char* from, const void*, std::uint64_t) {
  if (census.in_step) census.current.host_waits["deep_copy " + std::string(from) + " -> " + to]++;
}

void on_allocate(Kokkos::Tools::SpaceHandle, const char* label, const void*, std::uint64_t) {
  if (census.in_step) census.current.allocations[label]++;
}

void install_callbacks() {
  using namespace Kokkos::Tools::Experimental;
  set_push_region_callback(on_push);
  set_pop_region_callback(on_pop);
  set_begin_parallel_for_callback(on_kernel);
  set_begin_parallel_reduce_callback(on_kernel);
  set_begin_parallel_scan_callback(on_kernel);
  set_end_parallel_for_callback(on_kernel_end);
  set_end_parallel_reduce_callback(on_kernel_end);
  set_end_parallel_scan_callback(on_kernel_end);
  set_profile_event_callback(on_event);
  set_begin_deep_copy_callback(on_deep_copy);
  set_allocate_data_callback(on_allocate);
}

long total(const std::map<std::string, long>& counts) {
  long sum = 0;
  for (const auto& [name, count] : counts) sum += count;
  return sum;
}

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return out + "\"";
}

std::string json_counts(const std::map<std::string, long>& counts) {
  std::string out = "{";
  for (const auto& [name, count] : counts) out += (out.size() > 1 ? ", " : "") + quoted(name) + ": " + std::to_string(count);
  return out + "}";
}

double per(long count, long layers) { return layers > 0 ? static_cast<double>(count) / layers : 0.0; }

void print_json(const Deck& deck, const StepCounts& step) {
  const long kernels = total(step.kernels);
  std::ostringstream out;
  out << "{\"deck\": " << quoted(deck.path) << ", \"family\": " << quoted(word_of(deck.model.family))
      << ", \"layers\": " << deck.model.layers << ", \"microbatches\": " << deck.schedule.microbatches
      << ", \"layer_backwards\": " << step.layer_backwards << ", \"launches_per_step\": " << kernels + step.products
      << ", \"kernel_launches_per_step\": " << kernels << ", \"products_per_step\": " << step.products
      << ", \"kernel_launches_per_layer\": " << per(step.layer_kernels, step.layer_backwards)
      << ", \"epilogue_launches_per_layer\": " << per(step.layer_epilogue_kernels, step.layer_backwards)
      << ", \"products_per_layer\": " << per(step.layer_products, step.layer_backwards)
      << ", \"optimizer_launches\": " << step.optimizer_kernels
      << ", \"host_syncs_in_step\": " << total(step.host_waits)
      << ", \"allocations_in_step\": " << total(step.allocations) << ", \"kernels\": " << json_counts(step.kernels)
      << ", \"host_syncs\": " << json_counts(step.host_waits) << ", \"allocations\": " << json_counts(step.allocations)
      << "}\n";
  std::cout << out.str();
}

// The deck as given, run for two steps into a scratch directory, from scratch.
Deck census_deck(int argc, char** argv, const std::string& output_dir) {
  if (argc < 2 || argv[1][0] == '-') throw InputError("usage: step_census DECK [--set section.key=value ...]");
  std::vector<std::string> overrides;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--set") != 0 || i + 1 >= argc)
      throw InputError(std::string("step_census: unknown argument '") + argv[i] + "' (expected --set section.key=value)");
    overrides.emplace_back(argv[++i]);
  }
  for (const char* forced : {"train.steps=2", "checkpoint.every=0", "checkpoint.resume=none"})
    overrides.emplace_back(forced);
  overrides.push_back("output.dir=" + output_dir);
  return load_deck(argv[1], overrides);
}

int run_census(int argc, char** argv) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string scratch = (std::filesystem::temp_directory_path() / "step_census_XXXXXX").string();
  if (rank == 0 && !mkdtemp(scratch.data())) throw std::runtime_error("step_census: cannot make a scratch directory");
  MPI_Bcast(scratch.data(), static_cast<int>(scratch.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
  int code = 0;
  {
    const Deck deck = census_deck(argc, argv, scratch);
    std::ostringstream log;  // the run's own output stays out of the JSON
    Trainer trainer(deck, MPI_COMM_WORLD, log, "");
    code = trainer.run();
    if (code == 0 && census.steps != 2) throw std::logic_error("step_census: saw " + std::to_string(census.steps) + " steps");
    if (code == 0 && rank == 0) print_json(deck, census.finished);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::filesystem::remove_all(scratch);
  return code;
}

}  // namespace
}  // namespace trident

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
#ifdef KOKKOS_ENABLE_CUDA
  Kokkos::initialize(Kokkos::InitializationSettings().set_device_id(trident::select_device(MPI_COMM_WORLD)));
#else
  Kokkos::initialize();
#endif
  trident::install_callbacks();
  int code = 0;
  try {
    code = trident::run_census(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << "step_census: " << error.what() << "\n";
    code = dynamic_cast<const trident::InputError*>(&error) ? trident::kExitBadInput : 1;
    int ranks = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks > 1) MPI_Abort(MPI_COMM_WORLD, code);  // the other ranks may wait in a collective
  }
  Kokkos::finalize();
  MPI_Finalize();
  return code;
}
