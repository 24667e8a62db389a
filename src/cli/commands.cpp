#include "cli/commands.hpp"

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/mpi_tuning.hpp"
#include "common/error.hpp"
#include "common/watchdog.hpp"
#include "deck/deck.hpp"
#include "kernels/blas_core.hpp"
#include "plan/layout.hpp"
#include "plan/report.hpp"
#include "predict/machine.hpp"
#include "predict/report.hpp"
#include "predict/search.hpp"
#include "predict/step_model.hpp"
#include "plan/schedule_report.hpp"
#include "schedule/csv_schedule.hpp"
#include "train/trainer.hpp"
#ifdef KOKKOS_ENABLE_CUDA
#include "gpu/device_selection.hpp"
#endif

namespace trident {

namespace {

// The one line a failure prints: its kind's prefix and message; a logic error is an invariant
// broken inside trident, not the user's doing, and says so.
std::string failure_line(const std::exception& error) {
  if (dynamic_cast<const InputError*>(&error)) return std::string("trident: error: ") + error.what();
  if (dynamic_cast<const std::logic_error*>(&error))
    return std::string("trident: internal error: ") + error.what() +
           " (a bug in trident: please report it with the deck, the command line and this message)";
  return std::string("trident: runtime failure: ") + error.what();
}

int exit_code_of(const std::exception& error) {
  return dynamic_cast<const InputError*>(&error) ? kExitBadInput : kExitRuntimeFailure;
}

// Runs `body` and turns its exceptions into exit codes with one message on stderr.
template <class Body>
int report_errors(Body&& body) {
  try {
    return body();
  } catch (const std::exception& error) {
    std::cerr << failure_line(error) << "\n";
    return exit_code_of(error);
  }
}

// Every rank runs `body`; then all agree on the outcome, so that a failure on some ranks never
// leaves the others waiting in a collective. The lowest failing rank prints its message
// (deck errors fail on every rank alike, so the user sees one message, from rank 0).
template <class Body>
int collectively(MPI_Comm comm, Body&& body) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  int code = kExitOk;
  std::string message;
  try {
    body();
  } catch (const std::exception& error) {
    code = exit_code_of(error);
    message = failure_line(error);
  }
  int worst = code;
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX, comm);
  if (worst == kExitOk) return kExitOk;
  int first_failing = code != kExitOk ? rank : INT32_MAX;
  MPI_Allreduce(MPI_IN_PLACE, &first_failing, 1, MPI_INT, MPI_MIN, comm);
  if (rank == first_failing) std::cerr << message << (rank > 0 ? " (rank " + std::to_string(rank) + ")" : "") << "\n";
  return worst;
}

// A failure after setup may strike one rank while the others wait in a collective: the only
// way to end every rank then is MPI_Abort, after printing what happened. A CollectiveFailure is
// thrown by every rank alike: all return, rank 0 printing, so the run's clean-up runs.
template <class Body>
int or_abort(MPI_Comm comm, Body&& body) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  bool every_rank_failed = false;
  const int code = report_errors([&] {
    try {
      body();
    } catch (const CollectiveFailure& failure) {
      every_rank_failed = true;
      if (rank == 0) std::cerr << failure_line(failure) << "\n";
      return kExitRuntimeFailure;
    }
    return kExitOk;
  });
  if (code != kExitOk && !every_rank_failed) abort_job(code);
  return code;
}

// "1f1b (p = 2, m = 4)" or "auto, chose zb-h1 (p = 2, m = 4)".
std::string schedule_summary(const Deck& deck, const Schedule& schedule) {
  std::string text = (deck.schedule.kind == ScheduleKind::automatic ? "auto, chose " : "") + word_of(schedule.kind);
  text += " (p = " + std::to_string(schedule.stages) + ", m = " + std::to_string(schedule.microbatches);
  if (schedule.chunks > 1) text += ", v = " + std::to_string(schedule.chunks);
  return text + ")";
}

// Runs `body` with Kokkos initialised on this rank and returns its exit code. On the GPU build each
// rank first takes the GPU of its node-local rank; a node with more ranks than GPUs is a launch
// error (exit 2 on every rank, before Kokkos starts) unless they may share them (share_device).
template <class Body>
int with_kokkos(int& argc, char** argv, bool share_device, Body&& body) {
#ifdef KOKKOS_ENABLE_CUDA
  int device = 0;
  const int code = collectively(MPI_COMM_WORLD, [&] { device = select_device(MPI_COMM_WORLD, share_device); });
  if (code != kExitOk) return code;
  (void)argc, (void)argv;  // Kokkos' own --kokkos-* options would fight the device chosen here
  Kokkos::ScopeGuard kokkos(Kokkos::InitializationSettings().set_device_id(device));
#else
  (void)share_device;
  Kokkos::ScopeGuard kokkos(argc, argv);
#endif
  return body();
}

}  // namespace

int version_command() {
  std::cout << "trident " << TRIDENT_VERSION << "\n";
  const std::string blas = openblas_kernels_line();
  if (!blas.empty()) std::cout << "BLAS " << blas << "\n";
  return kExitOk;
}

int check_command(const CliArgs& args) {
  return report_errors([&] {
    const Deck deck = load_deck(args.deck_path, args.overrides);
    const Schedule schedule = deck_schedule(deck);  // the generators' own rules, checked before any run
    const ParallelConfig& grid = deck.parallel;
    std::cout << deck.path << ": ok (" << deck.model.layers << " layers, d_model " << deck.model.d_model
              << ", schedule " << schedule_summary(deck, schedule) << ")\n"
              << "ranks: " << grid.world_size() << " (" << describe_grid(grid) << ")\n"
              << "output: " << deck.output.dir << "\n";
    return kExitOk;
  });
}

int plan_command(const CliArgs& args) {
  return report_errors([&] {
    const Deck deck = load_deck(args.deck_path, args.overrides);
    const Schedule schedule = deck_schedule(deck);
    if (args.csv) {
      std::cout << schedule_csv(schedule);
      return kExitOk;
    }
    // The plan's partition and memory follow the schedule that will run: auto's choice.
    Deck planned = deck;
    std::vector<std::string> notes;
    if (deck.schedule.kind == ScheduleKind::automatic) {
      planned.schedule.kind = schedule.kind;
      planned.schedule.virtual_stages = schedule.chunks;
      notes.push_back("schedule.kind = \"auto\" chose " + schedule_summary(planned, schedule) +
                      ": the plan below is for it; the schedule table compares the kinds");
    }
    // Composed whole first, so that an error part-way prints no half plan.
    std::ostringstream text;
    const int ranks = args.ranks.value_or(deck.parallel.world_size());
    print_plan(text, planned, ranks, notes);
    if (!args.machine_path.empty()) {
      const Machine machine = load_machine(args.machine_path);
      Deck predicted = deck;  // print_plan accepted `ranks`: a multiple of tp * cp * pp
      predicted.parallel.dp = ranks / (deck.parallel.tp * deck.parallel.cp * deck.parallel.pp);
      std::optional<StepPrediction> searched;  // the search predicts the deck's own grid too
      if (args.search) {
        constexpr int kShown = 10;
        const GridSearch search = search_grids(predicted, machine, ranks, kShown);
        if (args.json) {
          print_search_json(std::cout, machine, ranks, search);
          return kExitOk;
        }
        print_search(text, machine, ranks, search);
        searched = search.deck_grid.prediction;
      }
      const StepPrediction prediction = searched ? *searched : predict_step(predicted, machine);
      if (args.json && !args.search) {
        print_prediction_json(std::cout, predicted, machine, prediction);
        return kExitOk;
      }
      print_prediction(text, predicted, machine, prediction);
    }
    print_schedule_table(text, deck);
    if (args.show_schedule) print_schedule_diagram(text, deck);
    std::cout << text.str();
    return kExitOk;
  });
}

int run_command(const CliArgs& args, int argc, char** argv) {
  const std::vector<MpiSetting> mpi_settings = apply_mpi_tuning_defaults();
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  // The deck first (it needs neither Kokkos nor a device): it says whether ranks may share a GPU.
  Deck deck;
  int code = collectively(MPI_COMM_WORLD, [&] { deck = load_deck(args.deck_path, args.overrides); });
  if (code == kExitOk)
    code = with_kokkos(argc, argv, deck.parallel.share_device, [&] {
      std::unique_ptr<Trainer> trainer;
      int result = collectively(MPI_COMM_WORLD, [&] {
        trainer = std::make_unique<Trainer>(deck, MPI_COMM_WORLD, std::cout, describe_mpi(mpi_settings));
      });
      int outcome = kExitOk;
      if (result == kExitOk) result = or_abort(MPI_COMM_WORLD, [&] { outcome = trainer->run(); });
      return result == kExitOk ? outcome : result;
    });
  MPI_Finalize();
  return code;
}

}  // namespace trident
