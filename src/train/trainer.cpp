#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <utility>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <vector>

#include "comm/timed_comm.hpp"
#include "common/error.hpp"
#include "data/batch_windows.hpp"
#include "data/token_stream.hpp"
#include "dp/global_grad_norm.hpp"
#include "dp/gradient_sync.hpp"
#include "dp/sharded_adamw.hpp"
#include "grid/process_grid.hpp"
#include "io/run_dir.hpp"
#include "io/timeline_writer.hpp"
#include "kernels/device.hpp"
#include "kernels/gemm.hpp"
#include "kernels/matmul_precision.hpp"
#include "model/gpt.hpp"
#include "pipeline/emulated_stage.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/model_stage.hpp"
#include "pipeline/stage_chunks.hpp"
#include "optim/adamw.hpp"
#include "optim/grad_norm.hpp"  // clip_factor
#include "optim/learning_rate.hpp"
#include "plan/model_size.hpp"
#include "plan/partition.hpp"
#include "plan/pipeline_theory.hpp"
#include "schedule/schedule.hpp"
#include "schedule/schedule_report.hpp"
#include "train/checkpoint.hpp"
#include "train/clock_sync.hpp"
#include "train/event_log.hpp"
#include "train/progress.hpp"
#include "train/stop_signal.hpp"

namespace trident {

namespace {

// A launch that started N singletons (srun without --mpi, a wrong mpirun) or a deck meant for
// another world size must fail here, loudly, on every rank, before any compute.
void check_world_size(const Deck& deck, MPI_Comm world) {
  int world_size = 0;
  MPI_Comm_size(world, &world_size);
  const ParallelConfig& grid = deck.parallel;
  if (world_size != grid.world_size())
    throw InputError(deck.path + ": parallel.tp × parallel.pp × parallel.dp = " + std::to_string(grid.tp) +
                     " × " + std::to_string(grid.pp) + " × " + std::to_string(grid.dp) + " = " +
                     std::to_string(grid.world_size()) + ", but MPI started " + std::to_string(world_size) +
                     " ranks: launch with mpirun -n " + std::to_string(grid.world_size()) +
                     " or change the grid (e.g. --set parallel.dp=...)");
  if (const char* tasks = std::getenv("SLURM_NTASKS"); tasks && std::atoi(tasks) != world_size)
    throw InputError("SLURM_NTASKS = " + std::string(tasks) + " but MPI sees a world of " +
                     std::to_string(world_size) +
                     " rank(s): the tasks did not join one MPI job (use srun --mpi=pmix or mpirun)");
}

std::unique_ptr<Optimizer> make_optimizer(const Deck& deck, Gpt& model, GradientSync& sync) {
  if (deck.parallel.zero == 1) return std::make_unique<ShardedAdamW>(sync, deck.train);
  return std::make_unique<AdamW>(model.params(), deck.train);
}

Schedule checked(Schedule schedule) {
  if (const std::string problem = find_schedule_problem(schedule); !problem.empty())
    throw std::logic_error("the " + schedule.kind + " generator made an invalid schedule: " + problem);
  return schedule;
}

// Device buffers for the token ids of every micro-batch of a step.
std::vector<IntBuffer> microbatch_buffers(const Deck& deck, const char* name) {
  std::vector<IntBuffer> buffers;
  for (int j = 0; j < deck.schedule.microbatches; ++j)
    buffers.emplace_back(std::string(name), static_cast<std::size_t>(deck.schedule.micro_batch_size) * deck.model.seq_len);
  return buffers;
}

// The stage partition and the schedule with its predicted bubble, for the start-up banner.
std::string describe_pipeline(const Deck& deck, const Schedule& schedule, const std::vector<StageLayers>& partition,
                              double predicted_bubble) {
  std::ostringstream out;
  out << "  stages  ";
  for (std::size_t vs = 0; vs < partition.size(); ++vs)
    out << (vs ? " | " : "") << "layers " << partition[vs].first_layer << "-" << partition[vs].end_layer() - 1;
  if (schedule.chunks > 1) out << "  (virtual stage i on pipeline rank i mod " << schedule.stages << ")";
  out << "\n  schedule " << schedule.kind << (deck.schedule.kind == "auto" ? " (chosen by auto)" : "") << ", p "
      << schedule.stages << ", m " << schedule.microbatches << ", v " << schedule.chunks << ": predicted bubble "
      << std::fixed << std::setprecision(1) << 100.0 * predicted_bubble << "% (simulated";
  if (schedule.chunks == 1 && (schedule.kind == "1f1b" || schedule.kind == "gpipe"))
    out << "; textbook (p-1)/(m+p-1) = " << 100.0 * theoretical_bubble(schedule.stages, schedule.microbatches) << "%";
  out << ")" << (deck.emulate.enabled ? ", EMULATED compute" : "")
      << (deck.schedule.recompute == "full" ? ", full recomputation" : "") << "\n";
  return out.str();
}

// "matmul tf32 (inputs rounded to TF32, fp32 accumulation)", with "emulated" where the BLAS has no such mode.
std::string describe_matmul_precision(MatmulPrecision deck_precision) {
  const MatmulPrecision precision = resolve_matmul_precision(deck_precision);
  std::string text = std::string("matmul ") + matmul_precision_name(precision);
  if (precision == MatmulPrecision::fp32) return text;
  text += precision == MatmulPrecision::tf32 ? " (inputs rounded to TF32" : " (inputs rounded to bf16";
#ifndef KOKKOS_ENABLE_CUDA
  text += ", emulated";
#endif
  return text + ", fp32 accumulation)";
}

}  // namespace

struct Trainer::State {
  State(const Deck& d, MPI_Comm w, std::ostream& l)
      : deck(d),
        world(w),
        grid(make_process_grid(w, d.parallel)),
        log(l),
        windows(load_tokens(d.data, d.model.vocab, d.train.seed), d.model.seq_len, d.schedule.micro_batch_size,
                d.schedule.microbatches, d.parallel.dp),
        schedule(checked(deck_schedule(d))),
        partition(partition_layers(d.model, d.parallel, schedule.chunks)),
        model(d.model, d.schedule.micro_batch_size, d.train.seed, *grid.tp_group,
              stage_chunks(schedule, partition, grid.pp_rank()),
              d.schedule.recompute == "full" ? Recompute::full : Recompute::none, d.train.precision),
        sync(model.params(), *grid.dp_group, static_cast<std::size_t>(d.parallel.bucket_mb * (1 << 20)),
             d.parallel.zero == 1),
        optimizer(make_optimizer(d, model, sync)),
        inputs(microbatch_buffers(d, "inputs")),
        targets(microbatch_buffers(d, "targets")),
        host_inputs(Kokkos::create_mirror(inputs[0])),  // a separate copy even where host = device
        host_targets(Kokkos::create_mirror(targets[0])),
        clock(w),
        executor(
            schedule, *grid.pp_group,
            {static_cast<std::size_t>(d.schedule.micro_batch_size) * d.model.seq_len * d.model.d_model,
             d.schedule.timeout_s, [this] { return now(); }, [this](const std::string& what) { abort_job(what); }}),
        compute(d.emulate.enabled
                    ? std::unique_ptr<StageCompute>(std::make_unique<EmulatedStage>(d.emulate))
                    : std::make_unique<ModelStage>(model, inputs, targets,
                                                   1.0f / static_cast<float>(d.tokens_per_step()), sync.hook())),
        flops_per_step(model_flops_per_step(d.model, d.tokens_per_step())) {}

  // A timestamp waits for the device work queued before it (a no-op on the CPU build), so that a GPU
  // action's event spans its kernels rather than their launch.
  double now() const {
    Kokkos::fence();
    return clock.now();
  }
  [[noreturn]] void abort_job(const std::string& what) const {
    std::cerr << "trident: world rank " << grid.world_rank << " (tp " << grid.tp_rank() << ", pp " << grid.pp_rank()
              << ", dp " << grid.dp_rank() << "): watchdog: " << what << ". Aborting the job." << std::endl;
    MPI_Abort(world, kExitRuntimeFailure);
    std::abort();
  }

  bool is_root() const { return grid.world_rank == 0; }

  Deck deck;
  MPI_Comm world;
  ProcessGrid grid;
  std::ostream& log;
  BatchWindows windows;
  Schedule schedule;
  std::vector<StageLayers> partition;  // layers of every virtual stage
  Gpt model;
  GradientSync sync;
  std::unique_ptr<Optimizer> optimizer;
  std::vector<IntBuffer> inputs, targets;  // per micro-batch
  HostIntBuffer host_inputs, host_targets;
  RunClock clock;  // one time axis for every rank's events
  PipelineExecutor executor;
  std::unique_ptr<StageCompute> compute;
  double flops_per_step;
  double gemm_peak_gflops = 0.0;
  const ParamTensor* wte = nullptr;  // this rank's copy of the tied embedding, if any
  double predicted_bubble = 0.0;     // the simulator's, for the deck's costs
  int start_step = 0;                // the checkpoint's step when resuming
  EventLog events;                   // this rank's events of the step in progress
  std::unique_ptr<TimelineWriter> timeline;  // world rank 0 only
};

Trainer::Trainer(const Deck& deck, MPI_Comm world, std::ostream& log, const std::string& mpi_summary) {
  check_world_size(deck, world);
  state_ = std::make_unique<State>(deck, world, log);
  State& s = *state_;
  const ParallelConfig& grid = deck.parallel;

  s.wte = s.model.params().try_find("wte.weight");
  s.predicted_bubble = simulate(s.schedule, deck_action_costs(deck, s.schedule.chunks)).bubble;

  const BlasInfo blas = blas_info();
  const std::string layout = describe_rank_layout(world, s.grid);
  if (s.is_root()) {
    s.log << "trident " << TRIDENT_VERSION << ": " << deck.path << "\n"
          << "  model   " << deck.model.layers << " layers, d_model " << deck.model.d_model << ", " << deck.model.heads
          << " heads, seq_len " << deck.model.seq_len << ", vocab " << deck.model.vocab << ", "
          << total_params(deck.model) << " parameters\n"
          << "  grid    tp " << grid.tp << " x pp " << grid.pp << " x dp " << grid.dp << " = " << grid.world_size()
          << " ranks (order " << grid.order << (grid.zero == 1 ? ", ZeRO-1" : "") << ")\n"
          << layout << "  batch   " << grid.dp << " replicas × " << deck.schedule.microbatches << " micro-batches × "
          << deck.schedule.micro_batch_size << " sequences = " << deck.tokens_per_step() << " tokens/step, "
          << s.windows.windows() << " windows of data (" << s.windows.stream().source << ")\n"
          << describe_pipeline(deck, s.schedule, s.partition, s.predicted_bubble) << "  BLAS    " << blas.library
          << " | core " << blas.core << " | " << blas.threads << " thread(s) | "
          << describe_matmul_precision(deck.train.precision) << "\n";
    if (!mpi_summary.empty()) s.log << "  MPI     " << mpi_summary << "\n";
    s.log << "  measuring sgemm peak ..." << std::flush;
  }
  // Every rank measures at once (the cores share the memory system as they will in training); a
  // rank the OS descheduled meanwhile measures too little, so the best core sets the peak.
  s.gemm_peak_gflops = measure_gemm_peak_gflops(deck.train.precision);
  MPI_Allreduce(MPI_IN_PLACE, &s.gemm_peak_gflops, 1, MPI_DOUBLE, MPI_MAX, world);
  if (s.is_root()) {
    s.log << " " << std::llround(s.gemm_peak_gflops) << " GFLOP/s per rank; model FLOPs/step "
          << s.flops_per_step / 1e9 << " G (6·N·tokens + 6·V·C·tokens + 6·L·T·C·tokens)\n"
          << "  output  " << deck.output.dir << "\n"
          << std::flush;
    prepare_run_dir(deck.output.dir, deck.text);
  }
  MPI_Barrier(world);  // the run directory exists before any rank looks for checkpoints in it
  s.start_step = resume_from_checkpoint(deck, s.grid, s.model.params(), *s.optimizer, log);
  install_stop_signal_handlers();
  if (s.is_root()) {
    const ModelConfig& m = deck.model;
    const std::string timeline_path = (std::filesystem::path(deck.output.dir) / kTimelineFile).string();
    const Attributes timeline_attributes{
        {"trident_version", std::string(TRIDENT_VERSION)},
        {"deck", deck.text},
        {"schedule", deck.schedule.kind},
        {"p", std::int64_t{grid.pp}},
        {"m", std::int64_t{deck.schedule.microbatches}},
        {"virtual_stages", std::int64_t{s.schedule.chunks}},
        {"schedule_kind", s.schedule.kind},  // what auto chose
        {"predicted_bubble", s.predicted_bubble},
        {"emulated", std::int64_t{deck.emulate.enabled ? 1 : 0}},
        {"tp", std::int64_t{grid.tp}},
        {"pp", std::int64_t{grid.pp}},
        {"dp", std::int64_t{grid.dp}},
        {"zero", std::int64_t{grid.zero}},
        {"layers", std::int64_t{m.layers}},
        {"d_model", std::int64_t{m.d_model}},
        {"heads", std::int64_t{m.heads}},
        {"seq_len", std::int64_t{m.seq_len}},
        {"vocab", std::int64_t{m.vocab}},
        {"micro_batch_size", std::int64_t{deck.schedule.micro_batch_size}},
        {"tokens_per_step", deck.tokens_per_step()},
        {"flops_per_step", s.flops_per_step},
        {"gemm_peak_gflops", s.gemm_peak_gflops},
        {"blas_library", blas.library},
        {"blas_core", blas.core},
        {"blas_threads", std::int64_t{blas.threads}},
        {"matmul_precision", std::string(matmul_precision_name(resolve_matmul_precision(deck.train.precision)))},
    };
    // A resumed run continues its timeline after the checkpoint's step.
    s.timeline = s.start_step > 0 ? std::make_unique<TimelineWriter>(timeline_path, timeline_attributes, grid.pp,
                                                                     TimelineWriter::Resume{s.start_step})
                                  : std::make_unique<TimelineWriter>(timeline_path, timeline_attributes, grid.pp);
    if (!s.timeline->note().empty()) s.log << "  " << s.timeline->note() << "\n";
  }
}

Trainer::~Trainer() = default;

int Trainer::run() {
  State& s = *state_;
  const Deck& deck = s.deck;
  const int microbatches = deck.schedule.microbatches;
  ProgressPrinter progress(s.log, s.start_step, deck.train.steps, deck.output.log_every, deck.parallel.pp > 1);
  if (s.start_step >= deck.train.steps && s.is_root())
    s.log << "nothing to do: the checkpoint is at step " << s.start_step << " of train.steps = " << deck.train.steps
          << " (raise train.steps to train further)\n";

  for (int step = s.start_step + 1; step <= deck.train.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    s.grid.tp_group->take_blocked_seconds();  // not the checkpoint's gathers between steps
    s.model.zero_grads();
    for (int mb = 0; mb < microbatches; ++mb) {
      s.windows.fill(step, s.grid.dp_rank(), mb, s.host_inputs.data(), s.host_targets.data());
      Kokkos::deep_copy(s.inputs[mb], s.host_inputs);
      Kokkos::deep_copy(s.targets[mb], s.host_targets);
    }
    PipelineStepResult pipeline = s.executor.run_step(*s.compute);
    s.events.events() = std::move(pipeline.events);
    // The tied wte's two copies (first and last stage) each hold part of its gradient: sum them,
    // then let data parallelism reduce it with the rest.
    if (const ParamTensor* wte = s.wte) {
      const double t0 = s.now();
      s.grid.embedding_group->all_reduce_sum(wte->in(s.model.params().grads), wte->size);
      if (s.grid.embedding_group->size() > 1)
        s.events.record({EventKind::allreduce_embedding, -1, -1, t0, s.now(),
                                   static_cast<std::int64_t>(wte->size * sizeof(float))});
      s.sync.on_grads_ready(wte->offset, wte->size);
    }
    const double reduce_start = s.now();
    s.sync.finish();
    if (s.grid.dp_group->size() > 1) s.events.record({EventKind::allreduce_dp, -1, -1, reduce_start, s.now(), 0});
    // The last stage's tp ranks each hold the whole loss (vocab-parallel cross-entropy); replicas
    // hold their share.
    const double loss_sum = s.grid.pp_group->all_reduce_sum(s.grid.dp_group->all_reduce_sum(pipeline.loss_sum));
    const double loss = loss_sum / static_cast<double>(deck.tokens_per_step());
    const double grad_norm = global_grad_norm(s.sync, s.grid);
    const double lr = learning_rate(step, deck.train);
    const double optimizer_start = s.now();
    s.optimizer->step(s.model.params(), step, lr, static_cast<float>(clip_factor(grad_norm, deck.train.grad_clip)));
    Kokkos::fence();
    s.events.record({EventKind::optimizer, -1, -1, optimizer_start, s.now(), 0});
    const double tp_comm_seconds = s.grid.tp_group->take_blocked_seconds();
    // The gather synchronises the ranks; waiting for the slowest one is the step's imbalance, not
    // the recording's cost, so it happens before the clock starts.
    MPI_Barrier(s.world);
    const double gather_start = s.now();
    const std::vector<EventRow> rows =
        gather_events(s.world, s.events, s.grid.tp_rank(), s.grid.pp_rank(), s.grid.dp_rank(), step);
    const double gather_seconds = s.now() - gather_start;
    std::vector<std::int64_t> stage_peaks(static_cast<std::size_t>(deck.parallel.pp), 0);
    stage_peaks[static_cast<std::size_t>(s.grid.pp_rank())] = static_cast<std::int64_t>(s.model.peak_activation_bytes());
    MPI_Reduce(s.is_root() ? MPI_IN_PLACE : stage_peaks.data(), stage_peaks.data(), deck.parallel.pp, MPI_INT64_T,
               MPI_MAX, 0, s.world);
    // Whichever rank waited longest shows what communication and imbalance cost the step; rank 0
    // alone may be the slow one that never waits (Megatron's timers report the maximum as well).
    double blocked_seconds[2] = {s.sync.last_exposed_seconds(), tp_comm_seconds};
    MPI_Reduce(s.is_root() ? MPI_IN_PLACE : blocked_seconds, blocked_seconds, 2, MPI_DOUBLE, MPI_MAX, 0, s.world);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    if (s.is_root()) {
      if (!std::isfinite(loss))
        throw std::runtime_error("loss became " + std::to_string(loss) + " at step " + std::to_string(step) +
                                 ": lower train.lr or enable train.grad_clip");
      StepRecord record;
      record.step = step;
      record.loss = loss;
      record.lr = lr;
      record.grad_norm = grad_norm;
      record.step_time_s = seconds;
      record.tokens_per_s = static_cast<double>(deck.tokens_per_step()) / seconds;
      record.bubble = measured_bubble(rows, s.grid.world_size);
      record.achieved_gflops = s.flops_per_step / seconds / 1e9;
      record.mfu = record.achieved_gflops / (s.gemm_peak_gflops * s.grid.world_size);
      record.dp_exposed_s = blocked_seconds[0];
      record.tp_comm_s = blocked_seconds[1];
      record.peak_activation_bytes = *std::max_element(stage_peaks.begin(), stage_peaks.end());
      record.peak_activation_bytes_per_stage = stage_peaks;
      const double append_start = s.now();
      s.timeline->append_events(rows);
      record.timeline_s = gather_seconds + (s.now() - append_start);
      s.timeline->append_step(record);
      progress.step(record);
    }
    // Signals are looked at here only, where every rank is between steps; all agree.
    int stop_signal = received_stop_signal();
    MPI_Allreduce(MPI_IN_PLACE, &stop_signal, 1, MPI_INT, MPI_MAX, s.world);
    const bool due = step == deck.train.steps || (deck.checkpoint.every > 0 && step % deck.checkpoint.every == 0);
    if (due || stop_signal) {
      if (s.is_root()) s.timeline->flush();
      save_checkpoint(deck, s.grid, s.model.params(), *s.optimizer, step, s.log);
    }
    if (stop_signal && step < deck.train.steps) {
      if (s.is_root())
        s.log << "stopped by signal " << stop_signal << " after step " << step
              << ": checkpoint saved; exit code 3 (resubmit: checkpoint.resume = \"auto\" continues)\n"
              << std::flush;
      return kExitCheckpointed;
    }
  }
  if (s.is_root()) s.log << "done: " << deck.train.steps << " steps; timeline " << deck.output.dir << "/timeline.h5\n";
  return kExitOk;
}

}  // namespace trident
