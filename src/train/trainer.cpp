#include "train/trainer.hpp"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <vector>

#include "common/error.hpp"
#include "data/batch_windows.hpp"
#include "data/token_stream.hpp"
#include "dp/global_grad_norm.hpp"
#include "dp/gradient_sync.hpp"
#include "dp/sharded_adamw.hpp"
#include "grid/process_grid.hpp"
#include "io/run_dir.hpp"
#include "io/timeline_writer.hpp"
#include "kernels/gemm.hpp"
#include "model/gpt.hpp"
#include "optim/adamw.hpp"
#include "optim/grad_norm.hpp"  // clip_factor
#include "optim/learning_rate.hpp"
#include "plan/model_size.hpp"
#include "train/checkpoint.hpp"
#include "train/progress.hpp"

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
  if (grid.pp > 1)
    throw InputError(deck.path + ": parallel.pp = " + std::to_string(grid.pp) +
                     ": pipeline parallelism is not implemented in this version; use parallel.pp = 1 "
                     "(tensor and data parallelism work)");
}

std::unique_ptr<Optimizer> make_optimizer(const Deck& deck, Gpt& model, GradientSync& sync) {
  if (deck.parallel.zero == 1) return std::make_unique<ShardedAdamW>(sync, deck.train);
  return std::make_unique<AdamW>(model.params(), deck.train);
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
        model(d.model, d.schedule.micro_batch_size, d.train.seed, *grid.tp),
        sync(model.params(), *grid.dp, static_cast<std::size_t>(d.parallel.bucket_mb * (1 << 20)),
             d.parallel.zero == 1),
        optimizer(make_optimizer(d, model, sync)),
        inputs("inputs", static_cast<std::size_t>(d.schedule.micro_batch_size) * d.model.seq_len),
        targets("targets", inputs.size()),
        host_inputs(Kokkos::create_mirror_view(inputs)),
        host_targets(Kokkos::create_mirror_view(targets)),
        flops_per_step(model_flops_per_step(d.model, d.tokens_per_step())) {}

  bool is_root() const { return grid.world_rank == 0; }

  Deck deck;
  MPI_Comm world;
  ProcessGrid grid;
  std::ostream& log;
  BatchWindows windows;
  Gpt model;
  GradientSync sync;
  std::unique_ptr<Optimizer> optimizer;
  IntBuffer inputs, targets;
  HostIntBuffer host_inputs, host_targets;
  double flops_per_step;
  double gemm_peak_gflops = 0.0;
  std::unique_ptr<TimelineWriter> timeline;  // world rank 0 only
};

Trainer::Trainer(const Deck& deck, MPI_Comm world, std::ostream& log) {
  check_world_size(deck, world);
  state_ = std::make_unique<State>(deck, world, log);
  State& s = *state_;
  const ParallelConfig& grid = deck.parallel;

  const BlasInfo blas = blas_info();
  const std::string layout = describe_rank_layout(world, s.grid);
  if (s.is_root()) {
    s.log << "trident " << TRIDENT_VERSION << ": " << deck.path << "\n"
          << "  model   " << deck.model.layers << " layers, d_model " << deck.model.d_model << ", "
          << deck.model.heads << " heads, seq_len " << deck.model.seq_len << ", vocab " << deck.model.vocab << ", "
          << total_params(deck.model) << " parameters\n"
          << "  grid    tp " << grid.tp << " x pp " << grid.pp << " x dp " << grid.dp << " = " << grid.world_size()
          << " ranks (order " << grid.order << (grid.zero == 1 ? ", ZeRO-1" : "") << ")\n"
          << layout << "  batch   " << grid.dp << " replicas × " << deck.schedule.microbatches
          << " micro-batches × " << deck.schedule.micro_batch_size << " sequences = " << deck.tokens_per_step()
          << " tokens/step, " << s.windows.windows() << " windows of data (" << s.windows.stream().source << ")\n"
          << "  BLAS    " << blas.library << " | core " << blas.core << " | " << blas.threads << " thread(s)\n"
          << "  measuring sgemm peak ..." << std::flush;
  }
  s.gemm_peak_gflops = measure_gemm_peak_gflops();
  if (s.is_root()) {
    s.log << " " << std::llround(s.gemm_peak_gflops) << " GFLOP/s per rank; model FLOPs/step "
          << s.flops_per_step / 1e9 << " G (6·N·tokens + 6·V·C·tokens + 6·L·T·C·tokens)\n"
          << "  output  " << deck.output.dir << "\n"
          << std::flush;
    prepare_run_dir(deck.output.dir, deck.text);
    const ModelConfig& m = deck.model;
    s.timeline = std::make_unique<TimelineWriter>(
        (std::filesystem::path(deck.output.dir) / kTimelineFile).string(),
        Attributes{
            {"trident_version", std::string(TRIDENT_VERSION)},
            {"deck", deck.text},
            {"schedule", deck.schedule.kind},
            {"p", std::int64_t{grid.pp}},
            {"m", std::int64_t{deck.schedule.microbatches}},
            {"virtual_stages", std::int64_t{deck.schedule.virtual_stages}},
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
        });
  }
}

Trainer::~Trainer() = default;

void Trainer::run() {
  State& s = *state_;
  const Deck& deck = s.deck;
  const int microbatches = deck.schedule.microbatches;
  const float loss_scale = 1.0f / static_cast<float>(deck.tokens_per_step());
  ProgressPrinter progress(s.log, deck.train.steps, deck.output.log_every);

  for (int step = 1; step <= deck.train.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    s.model.zero_grads();
    double loss_sum = 0.0;
    for (int mb = 0; mb < microbatches; ++mb) {
      s.windows.fill(step, s.grid.coords.dp, mb, s.host_inputs.data(), s.host_targets.data());
      Kokkos::deep_copy(s.inputs, s.host_inputs);
      Kokkos::deep_copy(s.targets, s.host_targets);
      loss_sum += s.model.forward(mb, s.inputs, s.targets);
      // Gradients become final during the last micro-batch's backward: reduce them as they do.
      const bool last = mb == microbatches - 1;
      s.model.backward(mb, loss_scale, last ? s.sync.hook() : Gpt::GradsReadyFn{});
    }
    s.sync.finish();
    // Every tp rank holds the whole loss (vocab-parallel cross-entropy); replicas hold their share.
    const double loss = s.grid.dp->all_reduce_sum(loss_sum) / static_cast<double>(deck.tokens_per_step());
    const double grad_norm = global_grad_norm(s.sync, s.grid);
    const double lr = learning_rate(step, deck.train);
    s.optimizer->step(s.model.params(), step, lr, static_cast<float>(clip_factor(grad_norm, deck.train.grad_clip)));
    Kokkos::fence();
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
      record.bubble = 0.0;  // one pipeline stage: nothing to wait for
      record.achieved_gflops = s.flops_per_step / seconds / 1e9;
      record.mfu = record.achieved_gflops / (s.gemm_peak_gflops * s.grid.world_size);
      record.dp_exposed_s = s.sync.last_exposed_seconds();
      record.peak_activation_bytes = static_cast<std::int64_t>(s.model.peak_activation_bytes());
      s.timeline->append_step(record);
      progress.step(record);
    }
    if (step == deck.train.steps || (deck.checkpoint.every > 0 && step % deck.checkpoint.every == 0))
      save_model_checkpoint(deck, s.grid, s.model.params(), step, s.log);
  }
  if (s.is_root()) s.log << "done: " << deck.train.steps << " steps; timeline " << deck.output.dir << "/timeline.h5\n";
}

}  // namespace trident
