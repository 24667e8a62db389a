#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <ostream>
#include <utility>
#include <vector>

#include "comm/timed_comm.hpp"
#include "common/error.hpp"
#include "data/batch_windows.hpp"
#include "data/token_stream.hpp"
#include "dp/gradient_sync.hpp"
#include "grid/process_grid.hpp"
#include "io/checkpoint_files.hpp"
#include "io/run_dir.hpp"
#include "io/timeline_writer.hpp"
#include "kernels/device.hpp"
#include "kernels/device_clock.hpp"
#include "kernels/gemm.hpp"
#include "kernels/matmul_precision.hpp"
#include "kernels/profile.hpp"
#include "optim/learning_rate.hpp"
#include "pipeline/executor.hpp"
#include "plan/buckets.hpp"
#include "plan/model_size.hpp"
#include "plan/partition.hpp"
#include "plan/replan.hpp"
#include "schedule/schedule.hpp"
#include "plan/schedule_report.hpp"
#include "train/checkpoint.hpp"
#include "train/checkpoint_saver.hpp"
#include "train/checkpoint_space.hpp"
#include "train/clock_sync.hpp"
#include "train/event_log.hpp"
#include "train/memory_fit.hpp"
#include "train/progress.hpp"
#include "train/replanner.hpp"
#include "train/resident_memory.hpp"
#include "train/run_summary.hpp"
#include "train/stage_work.hpp"
#include "train/step_figures.hpp"
#include "train/step_tokens.hpp"
#include "train/stop_signal.hpp"

namespace trident {

namespace {

// How the watchdog names the world in its report (common/watchdog.hpp).
const std::string& world_group(MPI_Comm world) {
  static const std::string name = [world] {
    int size = 0;
    MPI_Comm_size(world, &size);
    return "the world group (all " + std::to_string(size) + " ranks)";
  }();
  return name;
}

// A launch that started N singletons (srun without --mpi, a wrong mpirun) or a deck meant for
// another world size must fail here, loudly, on every rank, before any compute.
void check_world_size(const Deck& deck, MPI_Comm world) {
  int world_size = 0;
  MPI_Comm_size(world, &world_size);
  const ParallelConfig& grid = deck.parallel;
  if (world_size != grid.world_size())
    throw InputError(deck.path + ": " + grid_keys(grid) + " = " + std::to_string(grid.world_size()) +
                     ", but MPI started " + std::to_string(world_size) +
                     " ranks: launch with mpirun -n " + std::to_string(grid.world_size()) +
                     " or change the grid (e.g. --set parallel.dp=...)");
  if (const char* tasks = std::getenv("SLURM_NTASKS"); tasks && std::atoi(tasks) != world_size)
    throw InputError("SLURM_NTASKS = " + std::string(tasks) + " but MPI sees a world of " +
                     std::to_string(world_size) +
                     " rank(s): the tasks did not join one MPI job (use srun --mpi=pmix or mpirun)");
}

Schedule checked(Schedule schedule) {
  if (const std::string problem = find_schedule_problem(schedule); !problem.empty())
    throw std::logic_error("the " + word_of(schedule.kind) + " generator made an invalid schedule: " + problem);
  return schedule;
}

// What one step leaves for its record: the global loss, the gradient norm before clipping, the
// learning rate, when the step began, and the validation loss when one was measured after it (with
// the seconds that took, which are not the step's).
struct StepTotals {
  double loss = 0.0;
  double aux_loss = 0.0;     // [model.moe]'s load-balancing loss (part of the objective)
  double expert_load = 0.0;  // [model.moe]: the busiest expert's tokens over the mean (0: dense)
  double grad_norm = 0.0;
  double lr = 0.0;
  std::chrono::steady_clock::time_point start;
  double val_loss = std::numeric_limits<double>::quiet_NaN();
  double eval_seconds = 0.0;
};

// World rank 0 takes the run directory's lock; every rank learns whether it did, so that a refusal
// ends them all with rank 0's message (cli/commands.cpp agrees on the outcome) and none goes on
// into the collectives of the set-up.
std::unique_ptr<RunDirLock> lock_run_dir(const Deck& deck, MPI_Comm world, std::ostream& log) {
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  std::unique_ptr<RunDirLock> lock;
  std::string refusal;
  if (rank == 0) {
    try {
      lock = std::make_unique<RunDirLock>(deck.output.dir, log);
    } catch (const InputError& error) {
      refusal = error.what();
    }
  }
  int refused = refusal.empty() ? 0 : 1;
  MPI_Bcast(&refused, 1, MPI_INT, 0, world);
  if (refused) throw InputError(rank == 0 ? refusal : "world rank 0 could not take output.dir's lock");
  return lock;
}

}  // namespace

struct Trainer::State {
  State(const Deck& d, MPI_Comm w, std::ostream& l)
      : deck(d),
        world(w),
        schedule(checked(deck_schedule(d))),
        grid(make_process_grid(w, d.parallel, schedule.placement)),
        log(l),
        windows(load_tokens(d.data, d.model.vocab, d.train.seed), d.model.seq_len, d.schedule.micro_batch_size,
                d.schedule.microbatches, d.parallel.dp, d.data.shuffle, static_cast<std::uint64_t>(d.train.seed)),
        partition(partition_layers(d.model, d.parallel, schedule.chunks)),
        deck_partition(partition),
        tokens(d.schedule.microbatches, d.schedule.micro_batch_size, d.model.seq_len, eod_token(d.data),
               {grid.cp_rank(), grid.cp_size()}, "step_tokens"),
        clock(w),
        executor(std::make_unique<PipelineExecutor>(schedule, *grid.pp_group, pipeline_options())),
        // deck: the copy this State keeps
        work(std::make_unique<StageWork>(deck, schedule, grid, partition, deck_partition, tokens, pipeline_options())),
        flops_per_step(model_flops_per_step(d.model, d.tokens_per_step())),
        predicted_bubble(simulate(schedule, deck_action_costs(d, schedule.chunks)).bubble) {
    deck.parallel.p2p = grid.config.p2p;  // as this build runs it (auto resolved)
  }

  // A timestamp of the device's work queued so far, for an event that spans its kernels rather
  // than their launch; settled into device times at the step's record (kernels/device_clock.hpp).
  double mark() { return device_clock.mark(); }
  [[noreturn]] void abort_job(const std::string& what) const {
    std::cerr << "trident: world rank " << grid.world_rank << " (tp " << grid.tp_rank() << ", pp " << grid.pp_rank()
              << ", dp " << grid.dp_rank() << "): watchdog: " << what << ". Aborting the job." << std::endl;
    trident::abort_job(kExitPeerLost);
  }

  bool is_root() const { return grid.world_rank == 0; }

  DataPosition data_position() const { return {windows.windows(), windows.shuffled()}; }

  // How both executors (training, evaluation) move messages and watch for hangs. A message is one
  // micro-batch's hidden states: this rank's rows of them (seq_len / cp of each sequence, a tp-th of
  // those under sequence parallelism).
  PipelineExecutor::Options pipeline_options() {
    const int sequence_shards = (deck.parallel.sequence_parallel ? deck.parallel.tp : 1) * deck.parallel.cp;
    return {static_cast<std::size_t>(deck.schedule.micro_batch_size) * deck.model.seq_len * deck.model.d_model /
                sequence_shards,
            deck.schedule.timeout_s,
            [this] { return clock.now(); },
            [this](const std::string& what) { abort_job(what); },
            [this] { return collective_events(); },
            [this](int pipeline_rank) { return describe_pipeline_peer(grid, pipeline_rank); },
            grid.config.p2p,
            [this] { return mark(); }};
  }

  // The TP collectives and CP ring hops of the action just run (train/event_log.hpp).
  std::vector<TimelineEvent> collective_events() {
    return take_collective_events(*grid.tp_group, *grid.cp_group, *grid.ep_group, clock.now() - steady_seconds());
  }

  void measure_gemm_peak(RunSummary& run);
  void open_timeline();
  template <class Write>
  void write_timeline(Write&& write);
  StepTotals train_step(int step);
  void sum_loss_over_grid();
  void update_weights(int step, double lr);
  void read_figures(StepTotals& totals);
  void settle_events();
  void evaluate_after(int step, StepTotals& totals);
  void load_microbatches(int step);
  void reduce_gradients();
  void record_step(int step, const StepTotals& totals, ProgressPrinter& progress);
  struct StepMaxima {
    std::vector<std::int64_t> stage_peaks;  // activation bytes per stage
    std::int64_t peak_rss = 0;
    double dp_exposed_s = 0.0, tp_comm_s = 0.0, cp_comm_s = 0.0, ep_comm_s = 0.0;
  };
  StepMaxima reduce_step_maxima();
  bool checkpoint_or_stop(int step);
  void record_save_events();
  void replan_after(int step);
  bool move_layers(int step, const Schedule& next, const std::vector<StageLayers>& moved_to);
  SavedState saved_state(int step) { return {work->model.params(), *work->optimizer, step, data_position()}; }

  Deck deck;
  MPI_Comm world;
  Schedule schedule;  // before the grid: its chunk placement says which rank holds the head
  ProcessGrid grid;
  std::ostream& log;
  BatchWindows windows;
  std::vector<StageLayers> partition;      // layers of every virtual stage
  std::vector<StageLayers> deck_partition;  // the split the deck gives ([emulate]'s times are for it)
  StepTokens tokens;  // the step's token ids, per micro-batch
  RunClock clock;                              // one time axis for every rank's events
  DeviceClock device_clock{[this] { return clock.now(); }};  // the device's work on that axis
  std::unique_ptr<PipelineExecutor> executor;  // rebuilt when re-planning switches the schedule
  std::unique_ptr<StageWork> work;             // rebuilt when re-planning moves layers
  double flops_per_step;
  double predicted_bubble;  // the simulator's, for the deck's costs
  std::string replans;      // world rank 0: one line per re-planning, as the timeline records them
  double gemm_peak_gflops = 0.0;
  int start_step = 0;                        // the checkpoint's step when resuming
  CheckpointSaver saver{deck, grid, world_group(world), log, [this] { return clock.now(); }};
  EventLog events;                           // this rank's events of the step in progress
  StepFigures figures{static_cast<std::size_t>(deck.model.layers) * deck.model.moe.experts};  // on the device
  Attributes timeline_root_attributes;       // world rank 0, until run() opens the timeline
  std::unique_ptr<TimelineWriter> timeline;  // world rank 0 only
};

// Every rank measures at once (the cores share the memory system as they will in training); a rank
// the OS descheduled meanwhile measures too little, so the best core sets the peak.
void Trainer::State::measure_gemm_peak(RunSummary& run) {
  if (is_root()) log << "  measuring sgemm peak ..." << std::flush;
  gemm_peak_gflops = measure_gemm_peak_gflops(deck.train.precision);
  MPI_Allreduce(MPI_IN_PLACE, &gemm_peak_gflops, 1, MPI_DOUBLE, MPI_MAX, world);
  run.gemm_peak_gflops = gemm_peak_gflops;
  if (is_root()) {
    print_banner_tail(log, run);
    log << std::flush;
  }
}

// World rank 0 writes the timeline; a resumed run continues it after the checkpoint's step. Opened
// by run(), not the constructor: a file that fails half-way cannot be closed, and only the job's
// abort (run()'s failure path) ends the process without HDF5 closing it again at MPI_Finalize.
void Trainer::State::open_timeline() {
  if (!is_root()) return;
  const std::string path = (std::filesystem::path(deck.output.dir) / kTimelineFile).string();
  const Attributes attributes = std::exchange(timeline_root_attributes, {});
  const int stages = deck.parallel.pp;
  write_timeline([&] {
    timeline = start_step > 0
                   ? std::make_unique<TimelineWriter>(path, attributes, stages, TimelineWriter::Resume{start_step})
                   : std::make_unique<TimelineWriter>(path, attributes, stages);
  });
  if (!timeline->note().empty()) log << "  " << timeline->note() << "\n";
}

// A timeline that cannot be written (its file system full, or gone) ends the run, saying what to do:
// the checkpoints are separate files, untouched, and a rerun resumes from the latest.
template <class Write>
void Trainer::State::write_timeline(Write&& write) {
  try {
    write();
  } catch (const std::runtime_error& error) {
    throw std::runtime_error("timeline not written: " + std::string(error.what()) +
                             "; free space there or set output.dir to another file system, then run again "
                             "(checkpoint.resume = \"auto\" continues from the latest checkpoint)");
  }
}

Trainer::Trainer(const Deck& deck, MPI_Comm world, std::ostream& log, const std::string& mpi_summary) {
  int world_rank = 0;
  MPI_Comm_rank(world, &world_rank);
  watchdog_ = std::make_unique<CommWatchdog>(deck.schedule.timeout_s, world_rank);
  check_world_size(deck, world);
  check_memory_fits(deck, world);
  run_dir_lock_ = lock_run_dir(deck, world, log);
  state_ = std::make_unique<State>(deck, world, log);
  State& s = *state_;
  RunSummary run{s.deck,  // parallel.p2p resolved
                 s.schedule,
                 s.partition,
                 s.predicted_bubble,
                 blas_info(),
                 describe_rank_layout(s.grid),
                 describe_data(deck.data, s.windows),
                 s.work->evaluator ? s.work->evaluator->describe() : "",
                 mpi_summary,
                 s.flops_per_step};
  if (s.is_root()) print_banner_head(log, run);
  s.measure_gemm_peak(run);
  if (s.is_root()) {
    prepare_run_dir(deck.output.dir, deck.text);
    warn_if_checkpoints_may_not_fit(deck, log);
  }
  MPI_Barrier(world);  // the run directory exists before any rank looks for checkpoints in it
  {
    const BlockedIn watched("read of the checkpoint", world_group(world), deck.checkpoint.timeout_s,
                            "checkpoint.timeout_s");
    s.start_step =
        resume_from_checkpoint(deck, s.grid, s.work->model.params(), *s.work->optimizer, s.data_position(), log);
  }
  s.saver.reserve(s.work->model.params());
  install_stop_signal_handlers();
  if (s.is_root()) s.timeline_root_attributes = timeline_attributes(run);
}

Trainer::~Trainer() = default;

int Trainer::run() {
  State& s = *state_;
  const Deck& deck = s.deck;
  s.open_timeline();
  ProgressPrinter progress(s.log, s.start_step, deck.train.steps, deck.output.log_every, deck.parallel.pp > 1);
  if (s.start_step >= deck.train.steps && s.is_root())
    s.log << "nothing to do: the checkpoint is at step " << s.start_step << " of train.steps = " << deck.train.steps
          << " (raise train.steps to train further)\n";
  {
    // The ranks start the first step together, so that none counts world rank 0's set-up (the
    // timeline, the banner) as time blocked in step 1's collectives.
    const BlockedIn watched("barrier before the first step", world_group(s.world));
    MPI_Barrier(s.world);
  }
  for (int step = s.start_step + 1; step <= deck.train.steps; ++step) {
    StepTotals totals = s.train_step(step);
    s.evaluate_after(step, totals);
    s.record_step(step, totals, progress);
    if (replan_due(deck.schedule, s.start_step + 1, step)) s.replan_after(step);
    if (s.checkpoint_or_stop(step)) return kExitCheckpointed;
  }
  if (s.is_root()) s.log << "done: " << deck.train.steps << " steps; timeline " << deck.output.dir << "/timeline.h5\n";
  return kExitOk;
}

// One optimizer step: the pipeline runs every micro-batch forward and backward (data parallelism
// reducing gradients as backward finishes them, through the hook given to make_stage_compute),
// the gradient reduction completes, the loss is summed over the grid, and AdamW steps. The loss
// and the gradient norm stay on the device until the step's end, where one copy reads them.
StepTotals Trainer::State::train_step(int step) {
  const ProfileRegion region(kStepRegion);
  StepTotals totals;
  totals.start = std::chrono::steady_clock::now();
  grid.tp_group->take_blocked_seconds();  // not the checkpoint's gathers between steps
  grid.cp_group->take_blocked_seconds();
  grid.ep_group->take_blocked_seconds();
  work->model.zero_grads();
  load_microbatches(step);
  PipelineStepResult pipeline = executor->run_step(*work->compute);
  events.events() = std::move(pipeline.events);
  reduce_gradients();
  sum_loss_over_grid();
  totals.lr = learning_rate(step, deck.train);
  update_weights(step, totals.lr);
  read_figures(totals);
  return totals;
}

// The last stage's tp ranks each hold the whole loss (vocab-parallel cross-entropy); replicas hold
// their share. Summed on the device.
void Trainer::State::sum_loss_over_grid() {
  work->compute->take_loss_sum(figures.loss_sum());
  grid.dp_cp_group->queue_all_reduce_sum(figures.loss_sum(), 1);
  grid.pp_group->queue_all_reduce_sum(figures.loss_sum(), 1);
  if (deck.model.moe.experts == 0) return;
  // Each TP rank computes the whole mixture: the sum runs over the replicas and the stages.
  work->model.take_mixture_figures(figures.mixture(), figures.mixture() + 1);
  grid.dp_cp_group->queue_all_reduce_sum(figures.mixture(), figures.mixture_size());
  grid.pp_group->queue_all_reduce_sum(figures.mixture(), figures.mixture_size());
}

// The gradient norm and AdamW, the norm's clip applied on the device.
void Trainer::State::update_weights(int step, double lr) {
  const ProfileRegion optimizer(kOptimizerRegion);
  const double start = mark();
  work->grad_norm.compute(figures.grad_norm_squared());
  work->optimizer->step(work->model.params(), step, lr, GradClip{figures.grad_norm_squared(), deck.train.grad_clip});
  events.record({EventKind::optimizer, -1, -1, start, mark(), 0});
}

// The step's one read of what it left on the device. On the GPU its collectives are ordered on the
// device, so one that never completes shows here, where the watchdog sees it.
void Trainer::State::read_figures(StepTotals& totals) {
  const BlockedIn watched("the step's device work (its kernels and collectives)", world_group(world));
  const StepFigures::Read read = figures.read();
  totals.loss = read.loss_sum / static_cast<double>(deck.tokens_per_step());
  totals.aux_loss = read.aux_loss_sum / static_cast<double>(deck.tokens_per_step());
  totals.expert_load = read.expert_load(deck.model.moe.experts);
  totals.grad_norm = std::sqrt(read.grad_norm_squared);
}

// The validation loss, when [eval] asks for it after this step.
void Trainer::State::evaluate_after(int step, StepTotals& totals) {
  if (!work->evaluator || !work->evaluator->due(step)) return;
  const auto start = std::chrono::steady_clock::now();
  totals.val_loss = work->evaluator->evaluate();
  totals.eval_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void Trainer::State::load_microbatches(int step) { tokens.load(windows, step, grid.dp_rank()); }

// The tied wte's two copies (first and last stage) each hold part of its gradient: they are
// summed, then data parallelism reduces it with the rest and finishes its buckets. The sum goes in
// pieces of parallel.bucket_mb: MPI's all-reduce keeps scratch as large as its buffer, and the
// whole embedding's gradient is the largest tensor (GPT-2 124M: 147 MiB).
void Trainer::State::reduce_gradients() {
  GradientSync& sync = work->sync;
  if (const ParamTensor* wte = work->wte) {
    const double t0 = mark();
    const std::size_t piece = bucket_elements(deck.parallel.bucket_mb);
    for (std::size_t done = 0; done < wte->size; done += piece)
      grid.embedding_group->all_reduce_sum(wte->in(work->model.params().grads) + done, std::min(piece, wte->size - done));
    if (grid.embedding_group->size() > 1)
      events.record(
          {EventKind::allreduce_embedding, -1, -1, t0, mark(), static_cast<std::int64_t>(wte->size * sizeof(float))});
    sync.on_grads_ready(wte->offset, wte->size);
  }
  const double reduce_start = mark();
  sync.finish();
  if (grid.dp_cp_group->size() > 1) events.record({EventKind::allreduce_dp, -1, -1, reduce_start, mark(), 0});
}

// The step's events on the device's times: each mark becomes the time the device reached it (the
// same on the CPU build, whose kernels run as they are launched).
void Trainer::State::settle_events() {
  device_clock.settle();
  for (TimelineEvent& event : events.events()) {
    event.t_start = device_clock.settled(event.t_start);
    event.t_end = device_clock.settled(event.t_end);
  }
}

// Gathers every rank's events and figures to world rank 0, which appends them to the timeline and
// prints the progress line.
void Trainer::State::record_step(int step, const StepTotals& totals, ProgressPrinter& progress) {
  // The gather synchronises the ranks; waiting for the slowest one is the step's imbalance, not
  // the recording's cost, so it happens before the clock starts.
  {
    const BlockedIn watched("barrier before the step's event gather", world_group(world));
    MPI_Barrier(world);
  }
  settle_events();
  const double gather_start = clock.now();
  std::vector<EventRow> rows;
  {
    const BlockedIn watched("gather of the step's events", world_group(world));
    rows = gather_events(world, events, grid.coords, step);
  }
  const double gather_seconds = clock.now() - gather_start;
  const StepMaxima maxima = reduce_step_maxima();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - totals.start).count() - totals.eval_seconds;
  if (!is_root()) return;
  if (!std::isfinite(totals.loss))
    throw std::runtime_error("loss became " + std::to_string(totals.loss) + " at step " + std::to_string(step) +
                             ": lower train.lr or enable train.grad_clip");
  StepRecord record;
  record.step = step;
  record.loss = totals.loss;
  record.val_loss = totals.val_loss;
  record.lr = totals.lr;
  record.grad_norm = totals.grad_norm;
  record.aux_loss = totals.aux_loss;
  record.expert_load = totals.expert_load;
  record.step_time_s = seconds;
  record.tokens_per_s = static_cast<double>(deck.tokens_per_step()) / seconds;
  record.bubble = measured_bubble(rows, grid.world_size);
  record.achieved_gflops = flops_per_step / seconds / 1e9;
  record.mfu = record.achieved_gflops / (gemm_peak_gflops * grid.world_size);
  record.dp_exposed_s = maxima.dp_exposed_s;
  record.tp_comm_s = maxima.tp_comm_s;
  record.cp_comm_s = maxima.cp_comm_s;
  record.ep_comm_s = maxima.ep_comm_s;
  record.peak_activation_bytes = *std::max_element(maxima.stage_peaks.begin(), maxima.stage_peaks.end());
  record.peak_activation_bytes_per_stage = maxima.stage_peaks;
  record.peak_rss_bytes = maxima.peak_rss;
  const double append_start = clock.now();
  write_timeline([&] { timeline->append_events(rows); });
  record.timeline_s = gather_seconds + (clock.now() - append_start);
  write_timeline([&] { timeline->append_step(record); });
  progress.step(record);
}

// On world rank 0: per stage the largest activation peak of its ranks, the largest resident set,
// and whichever rank waited longest in communication (what communication and imbalance cost the
// step; rank 0 alone may be the slow one that never waits; Megatron's timers report the maximum).
Trainer::State::StepMaxima Trainer::State::reduce_step_maxima() {
  std::vector<std::int64_t> peaks(static_cast<std::size_t>(deck.parallel.pp) + 1, 0);
  peaks[static_cast<std::size_t>(grid.pp_rank())] = static_cast<std::int64_t>(work->model.peak_activation_bytes());
  peaks.back() = peak_resident_bytes();
  double blocked_seconds[4] = {work->sync.last_exposed_seconds(), grid.tp_group->take_blocked_seconds(),
                               grid.cp_group->take_blocked_seconds(), grid.ep_group->take_blocked_seconds()};
  {
    const BlockedIn watched("reduce of the step's figures", world_group(world));
    MPI_Reduce(is_root() ? MPI_IN_PLACE : peaks.data(), peaks.data(), deck.parallel.pp + 1, MPI_INT64_T, MPI_MAX, 0,
               world);
    MPI_Reduce(is_root() ? MPI_IN_PLACE : blocked_seconds, blocked_seconds, 4, MPI_DOUBLE, MPI_MAX, 0, world);
  }
  const std::int64_t peak_rss = peaks.back();
  peaks.pop_back();
  return {std::move(peaks), peak_rss, blocked_seconds[0], blocked_seconds[1], blocked_seconds[2], blocked_seconds[3]};
}

// Saves a checkpoint when one is due or a stop signal arrived; returns whether to stop. Signals are
// looked at here only, where every rank is between steps, and all ranks agree.
bool Trainer::State::checkpoint_or_stop(int step) {
  const int stop_signal = saver.poll(step, received_stop_signal());
  const bool due = step == deck.train.steps || (deck.checkpoint.every > 0 && step % deck.checkpoint.every == 0);
  if ((due || stop_signal) && saver.saved_step() != step) {
    if (is_root()) write_timeline([&] { timeline->flush(); });
    saver.save(saved_state(step), step == deck.train.steps || stop_signal != 0);
  }
  record_save_events();
  if (!stop_signal || step == deck.train.steps) return false;
  if (is_root())
    log << "stopped by signal " << stop_signal << " after step " << step
        << ": checkpoint saved; exit code 3 (resubmit: checkpoint.resume = \"auto\" continues)\n"
        << std::flush;
  return true;
}

// The saves' events (all ranks have the same saves) to the timeline, under each save's step.
void Trainer::State::record_save_events() {
  for (const SaveEvents& save : saver.take_events()) {
    std::vector<EventRow> rows;
    {
      const BlockedIn watched("gather of the checkpoint's events", world_group(world));
      rows = gather_events(world, save.events, grid.coords, save.step);
    }
    if (is_root()) write_timeline([&] { timeline->append_events(rows); });
  }
}

// schedule.replan: every rank measures the same costs, so all reach the same decision; a switch
// takes effect from the next step, the executor rebuilt for the new lists (the chunks keep their
// placement) and, where the decision moves layers (off a straggler's stage too), the stage work
// rebuilt around them.
void Trainer::State::replan_after(int step) {
  constexpr double kSavingToSwitch = 0.05;  // of the running schedule's simulated step time
  const MeasuredCosts measured =
      measured_action_costs(world, schedule, grid.world_rank, grid.pp_rank(), events.events());
  ReplanOptions options{deck.schedule.auto_memory_limit, deck.schedule.activation_budget, kSavingToSwitch, partition,
                        measured.slowdowns};
  const ReplanDecision decision = replan(schedule, measured.costs, options);
  const std::string line = "after step " + std::to_string(step) +
                           ", simulated with the measured costs: " + decision.summary +
                           (decision.switches ? "; switching to " : "; keeping ") + word_of(decision.best.kind) +
                           (decision.moved_to.empty() ? "" : " on the moved layers");
  if (is_root()) {
    log << "  replan " << line << "\n" << std::flush;
    replans += (replans.empty() ? "" : "\n") + line;
    write_timeline([&] { timeline->set_attribute("replans", replans); });
  }
  if (!decision.switches) return;
  if (!decision.moved_to.empty() && !move_layers(step, decision.best, decision.moved_to)) return;
  schedule = decision.best;
  executor = std::make_unique<PipelineExecutor>(schedule, *grid.pp_group, pipeline_options());
  predicted_bubble = simulate(schedule, deck_action_costs(deck, schedule.chunks)).bubble;
  if (is_root()) write_timeline([&] { timeline->set_attribute("schedule_kind", word_of(schedule.kind)); });
}

// Moves layers between the stages through a checkpoint of this step: every rank writes the
// weights and moments of its layers, builds the stage work of its new ones, and reads them back
// (any split reads any split's checkpoint). Returns false, the layers staying, when the checkpoint
// could not be written under checkpoint.on_failure = "continue".
bool Trainer::State::move_layers(int step, const Schedule& next, const std::vector<StageLayers>& moved_to) {
  if (!saver.save(saved_state(step), false, true)) return false;
  deck.parallel.stage_layers = layer_counts(moved_to);
  partition = moved_to;
  work.reset();  // the old layers' memory is free before the new ones take theirs
  work = std::make_unique<StageWork>(deck, next, grid, partition, deck_partition, tokens, pipeline_options());
  Deck reload = deck;
  reload.checkpoint.resume = CheckpointConfig::Resume::file;
  reload.checkpoint.resume_file = (std::filesystem::path(checkpoint_dir(deck)) / checkpoint_file_name(step)).string();
  const BlockedIn watched("read of the checkpoint", world_group(world), deck.checkpoint.timeout_s,
                          "checkpoint.timeout_s");
  resume_from_checkpoint(reload, grid, work->model.params(), *work->optimizer, data_position(), log);
  if (is_root()) write_timeline([&] { timeline->set_attribute("stage_layers", layer_counts_text(partition)); });
  return true;
}

}  // namespace trident
