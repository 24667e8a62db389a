// Step census: runs two training steps of a deck and counts what the second one launches, through
// the Kokkos Tools callbacks and the regions trident names (kernels/profile.hpp): Kokkos kernels by
// label, matrix products (one gemm() or gemm_strided_batched() each: one cuBLAS call on the GPU),
// the host's waits for the device, and device allocations. Step 1 is left out: buffers that grow on
// first use (the activation arena, operand scratch) grow there. Prints one JSON object.
//   build/cpu/bench/step_census DECK [--time] [--machine FILE] [--set section.key=value ...]
//   mpirun -n N build/cpu/bench/step_census DECK ...   (grids: world rank 0's counts)
// Per layer: the kernels and products of the layers' forward, backward and weight-gradient regions,
// divided by the layer backwards run (layers on the rank × micro-batches). Kernels launched inside a
// product (an epilogue's, where the library does not fuse it: kernels/gemm_epilogue.hpp; operand
// rounding) are launches, listed under the label prefix "gemm/", and counted per layer apart from
// the others (epilogue_launches_per_layer). A host wait is a fence (wait_for_device), a
// reduction read on the host, an event waited on, or a deep copy (Kokkos' deep_copy without an
// execution space fences before and after, on the CPU build too, where it costs nothing).
//
// --machine FILE (a machine file, DESIGN.md "Machine files and step prediction") also predicts each
// launch's time on that machine from its declared cost, as `trident plan --machine` prices work
// (predict/machine.hpp: a kernel's bytes at the memory bandwidth or its operations at the FP32 peak,
// whichever is slower; a product at the deck's precision's peak times its efficiency), and prints a
// table of predicted against measured time (with --time) per kernel label and per product to stderr.
//
// --time also times the second step on the device (kernels/device_clock.hpp: CUDA events on the
// compute stream, each kernel and product bracketed; on the CPU build, where work runs as it is
// launched, the host clock): milliseconds per kernel label and per product (named by its region and
// its place in it, "layer_forward #01" the first product of each layer's forward), and the step's
// time that no kernel or product covers ("between": the device idle, waiting for the host to queue
// work). Two events per launch add a few microseconds of host time each, so "between" is an upper
// bound.
#include <mpi.h>
#include <unistd.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "deck/deck.hpp"
#include "kernels/blas_core.hpp"
#include "kernels/device_clock.hpp"
#include "kernels/profile.hpp"
#include "plan/text_table.hpp"
#include "predict/machine.hpp"
#include "predict/step_model.hpp"
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
  std::map<std::string, KernelCost> kernel_costs;  // label → declared bytes and operations, summed
  std::set<std::string> undeclared;                // labels launched without a declared cost
  std::map<std::string, long> product_launches;          // product name → launches
  std::map<std::string, KernelCost> product_named_costs;  // product name → declared cost, summed
  std::map<std::string, double> kernel_predicted_s, product_predicted_s;  // --machine
  KernelCost product_costs;                        // all products'
  long products = 0;
  long layer_kernels = 0, layer_epilogue_kernels = 0, layer_products = 0, layer_backwards = 0;
  long optimizer_kernels = 0;
};

struct Census {
  std::vector<std::string> regions;  // open regions, innermost last
  bool in_step = false;
  StepCounts current, finished;
  int steps = 0;
  std::string layer_region;  // innermost layer region (short name) or "outside layers"
  int layer_region_products = 0;  // products so far in the current layer region

  bool inside(const char* name) const {
    for (const std::string& region : regions)
      if (region == name) return true;
    return false;
  }
  bool in_layer() const {
    return inside(kLayerForwardRegion) || inside(kLayerBackwardRegion) || inside(kLayerWeightGradRegion);
  }
  // A product is named by its region and its place in it: "layer_forward #01" the first product of
  // each layer's forward ("#01": names sort in order).
  std::string next_product_name() {
    if (!in_layer()) return "outside layers";
    const int place = ++layer_region_products;
    return layer_region + (place < 10 ? " #0" : " #") + std::to_string(place);
  }
};

// --machine: each launch's time on the machine, from its declared cost.
struct Prediction {
  Machine machine;
  double product_peak = 0.0;  // FLOP/s at the deck's train.precision
  double plan_step_s = 0.0;   // `trident plan --machine`'s step time for the deck (its own step model)

  double kernel_seconds(const KernelCost& cost) const { return machine.kernel_seconds(cost.bytes, cost.flops); }
  double product_seconds(const KernelCost& cost) const {
    return machine.product_seconds(cost.flops, cost.bytes, product_peak);
  }
};

// A kernel's or product's span of device time, between two marks of the clock.
struct Span {
  std::string label;
  bool product = false, nested = false;  // nested: a kernel inside a product
  double begin = 0.0, end = 0.0;
};

// The device times of one step's kernels and products (--time).
struct StepTimes {
  std::map<std::string, double> kernel_ms, product_ms;
  double step_ms = 0.0, kernels_ms = 0.0, products_ms = 0.0;
};

// Marks of the device clock around every kernel and product of a step, settled at its end.
struct StepTimer {
  // Strictly increasing, so that every mark has its own provisional time (DeviceClock::settled).
  DeviceClock clock{[last = 0.0]() mutable {
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    last = now > last ? now : last + 1e-9;
    return last;
  }};
  std::vector<Span> spans;
  double step_begin = 0.0;
  int open_product = -1;  // index of the product span open now

  void start_step() {
    spans.clear();
    step_begin = clock.mark();
  }
  std::size_t open(std::string label, bool product) {
    spans.push_back({std::move(label), product, open_product >= 0 && !product, clock.mark(), 0.0});
    return spans.size() - 1;
  }
  void close(std::size_t span) { spans[span].end = clock.mark(); }

  StepTimes finish_step() {
    const double step_end = clock.mark();
    clock.settle();
    StepTimes times;
    const auto ms = [&](double from, double to) { return 1e3 * (clock.settled(to) - clock.settled(from)); };
    times.step_ms = ms(step_begin, step_end);
    for (const Span& span : spans) {
      const double length = ms(span.begin, span.end);
      (span.product ? times.product_ms : times.kernel_ms)[span.label] += length;
      if (span.product) times.products_ms += length;
      if (!span.product && !span.nested) times.kernels_ms += length;
    }
    return times;
  }
};

Census census;
std::unique_ptr<StepTimer> timer;  // with --time
std::unique_ptr<Prediction> prediction;  // with --machine
std::string machine_path;
StepTimes step_times;

std::string short_region(const char* name) {
  const std::string text(name);
  const std::size_t colons = text.rfind(':');
  return colons == std::string::npos ? text : text.substr(colons + 1);
}

void on_product() {
  census.current.products++;
  if (census.in_layer()) census.current.layer_products++;
  const KernelCost cost = take_kernel_cost();
  census.current.product_costs.bytes += cost.bytes;
  census.current.product_costs.flops += cost.flops;
  const std::string name = census.next_product_name();
  census.current.product_launches[name]++;
  census.current.product_named_costs[name].bytes += cost.bytes;
  census.current.product_named_costs[name].flops += cost.flops;
  if (prediction) census.current.product_predicted_s[name] += prediction->product_seconds(cost);
  if (timer) timer->open_product = static_cast<int>(timer->open(name, true));
}

void on_push(const char* name) {
  census.regions.emplace_back(name);
  if (!census.in_step && std::strcmp(name, kStepRegion) == 0) {
    census.in_step = true;
    census.current = {};
    census.layer_region = "outside layers";
    census.layer_region_products = 0;
    if (timer) timer->start_step();
  }
  if (!census.in_step) return;
  const bool layer_region = std::strcmp(name, kLayerForwardRegion) == 0 ||
                            std::strcmp(name, kLayerBackwardRegion) == 0 || std::strcmp(name, kLayerWeightGradRegion) == 0;
  if (layer_region) {
    census.layer_region = short_region(name);
    census.layer_region_products = 0;
  }
  if (std::strcmp(name, kProductRegion) == 0) on_product();
  if (std::strcmp(name, kLayerBackwardRegion) == 0) census.current.layer_backwards++;
}

void on_pop() {
  if (census.regions.empty()) return;
  if (census.in_step && census.regions.back() == kStepRegion) {
    census.in_step = false;
    census.finished = census.current;
    census.steps++;
    if (timer) step_times = timer->finish_step();
  }
  if (timer && census.in_step && census.regions.back() == kProductRegion && timer->open_product >= 0) {
    timer->close(static_cast<std::size_t>(timer->open_product));
    timer->open_product = -1;
  }
  census.regions.pop_back();
}

// A kernel's id is its span's index + 1 (0: not timed).
void on_kernel(const char* label, const std::uint32_t, std::uint64_t* id) {
  *id = 0;
  if (!census.in_step) return;
  const bool in_product = census.inside(kProductRegion);
  const std::string name = (in_product ? "gemm/" : "") + std::string(label);
  census.current.kernels[name]++;
  const KernelCost cost = take_kernel_cost();
  KernelCost& sum = census.current.kernel_costs[name];
  sum.bytes += cost.bytes;
  sum.flops += cost.flops;
  if (cost.bytes == 0.0 && cost.flops == 0.0) census.current.undeclared.insert(name);
  if (prediction) census.current.kernel_predicted_s[name] += prediction->kernel_seconds(cost);
  if (census.in_layer()) (in_product ? census.current.layer_epilogue_kernels : census.current.layer_kernels)++;
  if (census.inside(kOptimizerRegion)) census.current.optimizer_kernels++;
  if (timer) *id = timer->open(name, false) + 1;
}

void on_kernel_end(std::uint64_t id) {
  if (timer && census.in_step && id > 0) timer->close(id - 1);
}

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

// {name: value} with ten significant digits (milliseconds, bytes, rates).
std::string json_values(const std::map<std::string, double>& times) {
  std::ostringstream out;
  out << std::setprecision(10) << "{";
  for (const auto& [name, ms] : times) out << (out.tellp() > 1 ? ", " : "") << quoted(name) << ": " << ms;
  out << "}";
  return out.str();
}

// Rates from the declared costs and the measured times: GB/s per kernel label, TFLOP/s per product.
std::map<std::string, double> rates(const std::map<std::string, double>& amounts, const std::map<std::string, double>& ms,
                                    double unit) {
  std::map<std::string, double> out;
  for (const auto& [name, amount] : amounts) {
    const auto found = ms.find(name);
    if (found != ms.end() && found->second > 0.0 && amount > 0.0) out[name] = amount / (1e-3 * found->second) / unit;
  }
  return out;
}

std::string json_times(const StepTimes& times, const StepCounts& step) {
  std::map<std::string, double> kernel_bytes, product_flops;
  for (const auto& [name, cost] : step.kernel_costs) kernel_bytes[name] = cost.bytes;
  for (const auto& [name, cost] : step.product_named_costs) product_flops[name] = cost.flops;
  std::ostringstream out;
  out << std::setprecision(10) << ", \"device_ms\": {\"step\": " << times.step_ms << ", \"kernels\": " << times.kernels_ms
      << ", \"products\": " << times.products_ms
      << ", \"between\": " << times.step_ms - times.kernels_ms - times.products_ms
      << "}, \"kernel_ms\": " << json_values(times.kernel_ms)
      << ", \"product_ms\": " << json_values(times.product_ms)
      << ", \"kernel_gb_per_s\": " << json_values(rates(kernel_bytes, times.kernel_ms, 1e9))
      << ", \"product_tflop_per_s\": " << json_values(rates(product_flops, times.product_ms, 1e12));
  return out.str();
}

std::string json_costs(const StepCounts& step) {
  std::map<std::string, double> bytes, flops;
  for (const auto& [name, cost] : step.kernel_costs) bytes[name] = cost.bytes, flops[name] = cost.flops;
  std::string undeclared = "[";
  for (const std::string& name : step.undeclared) undeclared += (undeclared.size() > 1 ? ", " : "") + quoted(name);
  std::ostringstream out;
  out << std::setprecision(10) << ", \"kernel_bytes\": " << json_values(bytes)
      << ", \"kernel_flops\": " << json_values(flops) << ", \"product_bytes\": " << step.product_costs.bytes
      << ", \"product_flops\": " << step.product_costs.flops << ", \"undeclared_kernels\": " << undeclared << "]";
  return out.str();
}

std::map<std::string, double> milliseconds(const std::map<std::string, double>& seconds) {
  std::map<std::string, double> out;
  for (const auto& [name, value] : seconds) out[name] = 1e3 * value;
  return out;
}

bool inside_product(const std::string& kernel_label) { return kernel_label.rfind("gemm/", 0) == 0; }

// The predicted time of the step's kernels (those outside products) and of its products (with the
// kernels launched inside them), as device_ms splits the measured time.
std::pair<double, double> predicted_parts(const StepCounts& step) {
  double kernels = 0.0, products = 0.0;
  for (const auto& [name, seconds] : step.kernel_predicted_s) (inside_product(name) ? products : kernels) += seconds;
  for (const auto& [name, seconds] : step.product_predicted_s) products += seconds;
  return {kernels, products};
}

std::string json_prediction(const StepCounts& step) {
  const auto [kernels, products] = predicted_parts(step);
  std::ostringstream out;
  out << std::setprecision(10) << ", \"machine\": " << quoted(prediction->machine.name)
      << ", \"predicted_ms\": {\"step\": " << 1e3 * (kernels + products) << ", \"kernels\": " << 1e3 * kernels
      << ", \"products\": " << 1e3 * products << "}, \"plan_step_ms\": " << 1e3 * prediction->plan_step_s
      << ", \"kernel_predicted_ms\": "
      << json_values(milliseconds(step.kernel_predicted_s))
      << ", \"product_predicted_ms\": " << json_values(milliseconds(step.product_predicted_s));
  return out.str();
}

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

// One row per kernel label and per product, the slowest predicted first.
void print_prediction_table(const StepCounts& step, std::ostream& out) {
  struct Row {
    std::string shown;
    long launches;
    KernelCost cost;
    double predicted_s;
    std::optional<double> measured_ms;  // with --time
  };
  const auto measured = [](const std::map<std::string, double>& times, const std::string& name) -> std::optional<double> {
    const auto found = times.find(name);
    if (!timer || found == times.end()) return std::nullopt;
    return found->second;
  };
  std::vector<Row> rows;
  for (const auto& [name, seconds] : step.kernel_predicted_s)
    rows.push_back({name, step.kernels.at(name), step.kernel_costs.at(name), seconds, measured(step_times.kernel_ms, name)});
  for (const auto& [name, seconds] : step.product_predicted_s)
    rows.push_back({"product " + name, step.product_launches.at(name), step.product_named_costs.at(name), seconds,
                    measured(step_times.product_ms, name)});
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.predicted_s > b.predicted_s; });
  TextTable table({"kernel or product", "launches", "MB", "GFLOP", "predicted ms", "measured ms", "measured/predicted"});
  for (const Row& row : rows) {
    const bool ratio = row.measured_ms && row.predicted_s > 0.0;
    table.add_row({row.shown, std::to_string(row.launches), fixed(row.cost.bytes / 1e6, 1), fixed(row.cost.flops / 1e9, 2),
                   fixed(1e3 * row.predicted_s, 3), row.measured_ms ? fixed(*row.measured_ms, 3) : "",
                   ratio ? fixed(*row.measured_ms / (1e3 * row.predicted_s), 2) : ""});
  }
  const auto [kernels, products] = predicted_parts(step);
  out << "step_census: one step on " << prediction->machine.name << " (" << machine_path
      << "), predicted from the declared costs" << (timer ? " against the measured device time" : "") << ": "
      << fixed(1e3 * (kernels + products), 3) << " ms";
  if (timer) out << " predicted, " << fixed(step_times.kernels_ms + step_times.products_ms, 3) << " ms measured in kernels and products";
  out << " (plan --machine's step model: " << fixed(1e3 * prediction->plan_step_s, 3) << " ms)\n";
  table.print(out);
}

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
      << json_costs(step) << (timer ? json_times(step_times, step) : "")
      << (prediction ? json_prediction(step) : "") << "}\n";
  std::cout << out.str();
}

// The deck as given, run for two steps into a scratch directory, from scratch.
Deck census_deck(int argc, char** argv, const std::string& output_dir) {
  if (argc < 2 || argv[1][0] == '-')
    throw InputError("usage: step_census DECK [--time] [--machine FILE] [--set section.key=value ...]");
  std::vector<std::string> overrides;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--time") == 0) {
      timer = std::make_unique<StepTimer>();
      continue;
    }
    const bool with_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--machine") == 0 && with_value) {
      machine_path = argv[++i];
      continue;
    }
    if (std::strcmp(argv[i], "--set") != 0 || !with_value)
      throw InputError(std::string("step_census: unknown argument '") + argv[i] +
                       "' (expected --time, --machine FILE or --set section.key=value)");
    overrides.emplace_back(argv[++i]);
  }
  const Machine machine = machine_path.empty() ? Machine{} : load_machine(machine_path);
  for (const char* forced : {"train.steps=2", "checkpoint.every=0", "checkpoint.resume=none"})
    overrides.emplace_back(forced);
  overrides.push_back("output.dir=" + output_dir);
  Deck deck = load_deck(argv[1], overrides);
  if (!machine_path.empty())
    prediction = std::make_unique<Prediction>(
        Prediction{machine, machine.peak_flops(deck.train.precision), predict_step(deck, machine).step_time_s});
  return deck;
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
    if (code == 0 && rank == 0 && prediction) print_prediction_table(census.finished, std::cerr);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::filesystem::remove_all(scratch);
  return code;
}

}  // namespace
}  // namespace trident

int main(int argc, char** argv) {
  trident::choose_blas_core_or_restart(argv);
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
  trident::timer.reset();  // its CUDA events before the context goes
  Kokkos::finalize();
  MPI_Finalize();
  return code;
}
