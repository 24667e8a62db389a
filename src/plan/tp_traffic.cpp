#include "plan/tp_traffic.hpp"

#include "family/family.hpp"

namespace trident {

namespace {

void add(PlannedCollectives& tally, std::int64_t count, std::int64_t bytes_each) {
  tally.count += count;
  tally.bytes += count * bytes_each;
}

// The tensors whose gradients sequence parallelism sums over TP after each layer: its two norms'.
std::int64_t norm_floats_per_layer(const ModelConfig& model) { return 2 * norm_floats(model); }

// Bytes of one all-gather of the norms' outputs: kept in bf16 under bf16 (only products read them).
std::int64_t norm_output_bytes(const Deck& deck, std::int64_t rows) {
  return (deck.train.precision == MatmulPrecision::bf16 ? 2 : 4) * rows * deck.model.d_model;
}

// The row-parallel products of a chunk's layers, whose outputs are summed over TP: attention's
// output projection and the MLP's down projection; a mixture of experts ([model.moe]) is whole on
// every TP rank, so its layer has the first only.
std::int64_t row_parallel_outputs(const ModelConfig& model, const StageLayers& chunk) {
  std::int64_t count = 0;
  for (int layer = chunk.first_layer; layer < chunk.end_layer(); ++layer) count += model.moe_layer(layer) ? 1 : 2;
  return count;
}

// One micro-batch's forward through a chunk of `layers` layers.
void add_forward(TpTraffic& t, const Deck& deck, const StageLayers& chunk, bool first, bool last) {
  const ModelConfig& model = deck.model;
  const std::int64_t rows = std::int64_t{deck.schedule.micro_batch_size} * model.seq_len / deck.parallel.cp;
  const std::int64_t hidden = 4 * rows * model.d_model, layers = chunk.num_layers;
  if (deck.parallel.sequence_parallel) {
    add(t.all_gather, 2 * layers + (last ? 1 : 0), norm_output_bytes(deck, rows));
    add(t.reduce_scatter, 2 * layers + (first ? 1 : 0), hidden);
  } else {
    add(t.all_reduce, row_parallel_outputs(model, chunk) + (first ? 1 : 0), hidden);
  }
  if (last) add(t.all_gather, 1, 4 * 3 * rows * deck.parallel.tp);  // the loss's row statistics
}

// One micro-batch's backward (input and weight gradients) through the same chunk.
void add_backward(TpTraffic& t, const Deck& deck, const StageLayers& chunk, bool first, bool last) {
  const ModelConfig& model = deck.model;
  const std::int64_t rows = std::int64_t{deck.schedule.micro_batch_size} * model.seq_len / deck.parallel.cp;
  const std::int64_t hidden = 4 * rows * model.d_model, layers = chunk.num_layers;
  if (!deck.parallel.sequence_parallel) {
    add(t.all_reduce, row_parallel_outputs(model, chunk) + (last ? 1 : 0), hidden);
    return;
  }
  add(t.all_gather, 2 * layers + (first ? 1 : 0), hidden);                         // output gradients
  add(t.all_gather, 2 * layers + (last ? 1 : 0), norm_output_bytes(deck, rows));  // for weight gradients
  add(t.reduce_scatter, 2 * layers + (last ? 1 : 0), hidden);
  add(t.all_reduce, layers, 4 * norm_floats_per_layer(model));
  if (last) add(t.all_reduce, 1, 4 * norm_floats(model));
}

}  // namespace

double TpTraffic::wire_bytes() const {
  const double share = static_cast<double>(tp - 1) / tp;
  return share * (2.0 * static_cast<double>(all_reduce.bytes) + static_cast<double>(all_gather.bytes) +
                  static_cast<double>(reduce_scatter.bytes));
}

TpTraffic tp_traffic_per_step(const Deck& deck, const std::vector<StageLayers>& stages, int rank) {
  TpTraffic per_microbatch;
  per_microbatch.tp = deck.parallel.tp;
  if (deck.parallel.tp == 1) return per_microbatch;
  const int last = static_cast<int>(stages.size()) - 1;
  const int forwards = deck.schedule.recompute == Recompute::full ? 2 : 1;
  for (int stage = rank; stage <= last; stage += deck.parallel.pp) {
    for (int pass = 0; pass < forwards; ++pass)
      add_forward(per_microbatch, deck, stages[stage], stage == 0, stage == last);
    add_backward(per_microbatch, deck, stages[stage], stage == 0, stage == last);
  }
  TpTraffic step = per_microbatch;
  for (PlannedCollectives* tally : {&step.all_reduce, &step.all_gather, &step.reduce_scatter}) {
    tally->count *= deck.schedule.microbatches;
    tally->bytes *= deck.schedule.microbatches;
  }
  return step;
}

}  // namespace trident
