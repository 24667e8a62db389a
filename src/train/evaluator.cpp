#include "train/evaluator.hpp"

#include <Kokkos_Core.hpp>

#include "data/token_stream.hpp"

namespace trident {

namespace {

Schedule checked_forward_only(const Schedule& training) {
  Schedule schedule = forward_only_schedule(training);
  if (const std::string problem = find_schedule_problem(schedule); !problem.empty())
    throw std::logic_error("the forward-only schedule of " + word_of(training.kind) + " is invalid: " + problem);
  return schedule;
}

TokenStream held_out_tokens(const Deck& deck) {
  const std::int64_t tokens = static_cast<std::int64_t>(deck.eval.batches) * deck.tokens_per_step() + 1;
  return load_eval_tokens(deck.data, deck.eval, deck.model.vocab, static_cast<std::uint64_t>(deck.train.seed), tokens);
}

}  // namespace

Evaluator::Evaluator(const Deck& deck, const Schedule& training, const ProcessGrid& grid, Transformer& model,
                     const PipelineExecutor::Options& options)
    : deck_(deck),
      grid_(grid),
      windows_(held_out_tokens(deck), deck.model.seq_len, deck.schedule.micro_batch_size, deck.schedule.microbatches,
               deck.parallel.dp),
      executor_(checked_forward_only(training), *grid.pp_group, options),
      tokens_(deck.schedule.microbatches, deck.schedule.micro_batch_size, deck.model.seq_len, eod_token(deck.data),
              {grid.cp_rank(), grid.cp_size()}, "eval_tokens"),
      stage_(model, tokens_.inputs, tokens_.targets, tokens_.positions) {}

bool Evaluator::due(int step) const {
  return step == deck_.train.steps || (deck_.eval.every > 0 && step % deck_.eval.every == 0);
}

double Evaluator::evaluate() {
  for (int batch = 1; batch <= deck_.eval.batches; ++batch) {
    tokens_.load(windows_, batch, grid_.dp_rank());
    executor_.run_step(stage_);  // its events are not the training step's
  }
  // As in training: the last stage's tp ranks each hold the whole loss, replicas their share.
  Kokkos::View<double, MemSpace> loss_sum("eval_loss_sum");
  stage_.take_loss_sum(loss_sum.data());
  grid_.dp_cp_group->queue_all_reduce_sum(loss_sum.data(), 1);
  grid_.pp_group->queue_all_reduce_sum(loss_sum.data(), 1);
  double total = 0.0;
  Kokkos::deep_copy(total, loss_sum);
  return total / static_cast<double>(static_cast<std::int64_t>(deck_.eval.batches) * deck_.tokens_per_step());
}

std::string Evaluator::describe() const {
  const std::string when =
      deck_.eval.every > 0 ? "every " + std::to_string(deck_.eval.every) + " steps and at the end" : "at the end";
  const std::int64_t needed = deck_.eval.batches * windows_.global_batch_sequences();
  const std::string repeats = windows_.windows() < needed
                                  ? "; it holds only " + std::to_string(windows_.windows()) + " windows, which repeat"
                                  : "";
  return std::to_string(deck_.eval.batches) + " batches of " + std::to_string(windows_.global_batch_sequences()) +
         " windows (" + windows_.stream().describe() + repeats + "), " + when;
}

}  // namespace trident
