#include "train/run_summary.hpp"

#include <cmath>
#include <cstdint>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "kernels/matmul_precision.hpp"
#include "plan/layout.hpp"
#include "plan/model_size.hpp"
#include "plan/pipeline_theory.hpp"

namespace trident {

namespace {

// The stage partition and the schedule with its predicted bubble.
std::string describe_pipeline(const RunSummary& run) {
  const Deck& deck = run.deck;
  const Schedule& schedule = run.schedule;
  std::ostringstream out;
  out << "  stages  ";
  for (std::size_t vs = 0; vs < run.partition.size(); ++vs)
    out << (vs ? " | " : "") << "layers " << run.partition[vs].first_layer << "-" << run.partition[vs].end_layer() - 1;
  if (schedule.chunks > 1) {
    out << "  (on pipeline ranks";
    for (std::size_t vs = 0; vs < run.partition.size(); ++vs) out << ' ' << schedule.rank_of(static_cast<int>(vs));
    out << ")";
  }
  out << "\n  schedule " << word_of(schedule.kind)
      << (deck.schedule.kind == ScheduleKind::automatic ? " (chosen by auto)" : "") << ", p " << schedule.stages
      << ", m " << schedule.microbatches << ", v " << schedule.chunks << ": predicted bubble " << std::fixed
      << std::setprecision(1) << 100.0 * run.predicted_bubble << "% (simulated";
  if (const ScheduleType* type = find_schedule_type(schedule.kind); type && type->bubble == BubbleTheory::textbook)
    out << "; textbook (p-1)/(m+p-1) = " << 100.0 * theoretical_bubble(schedule.stages, schedule.microbatches) << "%";
  out << ")" << (deck.emulate.enabled ? ", EMULATED compute" : "")
      << (deck.schedule.recompute == Recompute::none ? "" : ", " + word_of(deck.schedule.recompute) + " recomputation")
      << "\n";
  const ScheduleConfig& config = deck.schedule;
  if (config.kind == ScheduleKind::automatic)
    out << "  auto    "
        << explain_auto_choice(schedule.stages, config.microbatches, config.virtual_stages, config.auto_memory_limit)
        << "\n";
  return out.str();
}

// "matmul tf32 (inputs rounded to TF32, fp32 accumulation)", with "emulated" where the BLAS has no such mode.
std::string describe_matmul_precision(MatmulPrecision deck_precision) {
  const MatmulPrecision precision = resolve_matmul_precision(deck_precision);
  std::string text = "matmul " + word_of(precision);
  if (precision == MatmulPrecision::fp32) return text;
  text += precision == MatmulPrecision::tf32 ? " (inputs rounded to TF32" : " (inputs rounded to bf16";
#ifndef KOKKOS_ENABLE_CUDA
  text += ", emulated";
#endif
  return text + ", fp32 accumulation)";
}

}  // namespace

void print_banner_head(std::ostream& out, const RunSummary& run) {
  const Deck& deck = run.deck;
  const ModelConfig& model = deck.model;
  const ParallelConfig& grid = deck.parallel;
  out << "trident " << TRIDENT_VERSION << ": " << deck.path << "\n"
      << "  model   " << model.layers << " layers, d_model " << model.d_model << ", " << model.heads
      << " heads, seq_len " << model.seq_len << ", vocab " << model.vocab << ", " << total_params(model)
      << " parameters, " << word_of(model.attention) << " attention\n"
      << "  grid    " << describe_grid(grid) << " = " << grid.world_size()
      << " ranks (order " << word_of(grid.order) << (grid.zero == 1 ? ", ZeRO-1" : "")
      << (grid.sequence_parallel ? ", sequence parallel" : "")
      << (grid.pp > 1 ? ", pipeline messages " + std::string(word_of(grid.p2p)) : "") << ")\n"
      << run.rank_layout << "  batch   " << grid.dp << " replicas × " << deck.schedule.microbatches
      << " micro-batches × " << deck.schedule.micro_batch_size << " sequences = " << deck.tokens_per_step()
      << " tokens/step, " << run.data << "\n"
      << (run.eval.empty() ? "" : "  eval    " + run.eval + "\n") << describe_pipeline(run) << "  BLAS    "
      << run.blas.library << " | core " << run.blas.core
      << (run.blas.core_note.empty() ? "" : " (" + run.blas.core_note + ")") << " | " << run.blas.threads << " thread(s) | "
      << describe_matmul_precision(deck.train.precision)
      << (deck.train.cuda_graph ? " | CUDA graphs: each action recorded at its second run, then replayed" : "") << "\n";
  if (!run.mpi.empty()) out << "  MPI     " << run.mpi << "\n";
}

void print_banner_tail(std::ostream& out, const RunSummary& run) {
  out << " " << std::llround(run.gemm_peak_gflops) << " GFLOP/s per rank; model FLOPs/step " << run.flops_per_step / 1e9
      << " G (6·N·tokens + 6·V·C·tokens + 6·L·T·C·tokens)\n"
      << "  output  " << run.deck.output.dir << "\n";
}

Attributes timeline_attributes(const RunSummary& run) {
  const Deck& deck = run.deck;
  const ModelConfig& m = deck.model;
  const ParallelConfig& grid = deck.parallel;
  return {
      {"trident_version", std::string(TRIDENT_VERSION)},
      {"deck", deck.text},
      {"schedule", word_of(deck.schedule.kind)},
      {"p", std::int64_t{grid.pp}},
      {"m", std::int64_t{deck.schedule.microbatches}},
      {"virtual_stages", std::int64_t{run.schedule.chunks}},
      {"stage_layers", layer_counts_text(run.partition)},  // re-planning may move them
      {"schedule_kind", word_of(run.schedule.kind)},       // what auto chose
      {"predicted_bubble", run.predicted_bubble},
      {"emulated", std::int64_t{deck.emulate.enabled ? 1 : 0}},
      {"tp", std::int64_t{grid.tp}},
      {"pp", std::int64_t{grid.pp}},
      {"dp", std::int64_t{grid.dp}},
      {"cp", std::int64_t{grid.cp}},
      {"ep", std::int64_t{grid.ep}},
      {"zero", std::int64_t{grid.zero}},
      {"sequence_parallel", std::int64_t{grid.sequence_parallel ? 1 : 0}},
      {"p2p", word_of(grid.p2p)},
      {"layers", std::int64_t{m.layers}},
      {"d_model", std::int64_t{m.d_model}},
      {"heads", std::int64_t{m.heads}},
      {"seq_len", std::int64_t{m.seq_len}},
      {"vocab", std::int64_t{m.vocab}},
      {"micro_batch_size", std::int64_t{deck.schedule.micro_batch_size}},
      {"tokens_per_step", deck.tokens_per_step()},
      {"flops_per_step", run.flops_per_step},
      {"gemm_peak_gflops", run.gemm_peak_gflops},
      {"blas_library", run.blas.library},
      {"blas_core", run.blas.core},
      {"blas_core_note", run.blas.core_note},
      {"blas_threads", std::int64_t{run.blas.threads}},
      {"matmul_precision", word_of(resolve_matmul_precision(deck.train.precision))},
      {"attention", word_of(m.attention)},
      {"document_mask_eod_token", std::int64_t{eod_token(deck.data)}},  // -1: documents not masked
  };
}

std::string describe_data(const DataConfig& data, const BatchWindows& windows) {
  std::string text = std::to_string(windows.windows()) + (windows.shuffled() ? " shuffled" : "") +
                     " windows of data (" + windows.stream().describe() + ")";
  if (data.document_mask) text.append(", documents packed: masked at token ").append(std::to_string(data.eod_token));
  return text;
}

}  // namespace trident
