#include "plan/memory.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#include "family/family.hpp"
#include "kernels/attention.hpp"
#include "kernels/gemm.hpp"
#include "plan/buckets.hpp"
#include "plan/model_size.hpp"
#include "plan/pipeline_theory.hpp"
#include "plan/schedule_report.hpp"

namespace trident {

std::int64_t activation_floats_per_microbatch(const ModelConfig& model, int micro_batch_size, int first_layer,
                                              int num_layers, bool first_stage, bool last_stage, int tp,
                                              StashMode mode) {
  if (first_layer < 0 || num_layers < 0 || first_layer + num_layers > model.layers) {
    throw std::invalid_argument("layers [" + std::to_string(first_layer) + ", " +
                                std::to_string(first_layer + num_layers) + ") are outside a model of " +
                                std::to_string(model.layers) + " layers");
  }
  const std::int64_t bt = static_cast<std::int64_t>(micro_batch_size) * model.seq_len;
  const std::int64_t c = model.d_model;
  const std::int64_t f = model.mlp_hidden();
  const std::int64_t qkv_width =
      static_cast<std::int64_t>(model.heads + 2 * model.key_value_heads()) * model.head_dim() / tp;
  // The residual stream's rows on this rank: all of them, or 1/tp under sequence parallelism.
  const std::int64_t rows = mode.sequence_parallel ? bt / tp : bt;
  // LayerNorm keeps mean and rstd per token, RMSNorm rstd only.
  const std::int64_t norm_stats = norm_stats_per_row(model) * rows;
  // The MLP's input products' outputs (GPT-2's c_fc; Llama's gate and up) and its activation
  // (GELU; silu(gate) · up), which products only read.
  const std::int64_t mlp_width = bt * f / tp;
  const std::int64_t mlp_hidden =
      mlp_input_products(model) * mlp_width +
      static_cast<std::int64_t>(product_input_floats(static_cast<std::size_t>(mlp_width), mode.bf16_product_inputs));
  const AttentionShape heads = attention_heads(model, micro_batch_size, tp);
  const bool rebuilt = !mode.keep_probabilities && model.attention == AttentionKernel::explicit_probabilities;
  const std::int64_t attention_saved = rebuilt ? 0 : static_cast<std::int64_t>(attention_saved_floats(heads));

  // A norm's output is read by products only (gathered first under sequence parallelism).
  const std::int64_t norm_output =
      static_cast<std::int64_t>(product_input_floats(static_cast<std::size_t>(rows * c), mode.bf16_product_inputs));
  const std::int64_t per_layer = norm_output + norm_stats  // first norm
                                 + bt * qkv_width           // q, k, v
                                 + attention_saved          // what attention keeps for backward
                                 + bt * c / tp              // attention output (before its projection)
                                 + rows * c                 // residual after attention
                                 + norm_output + norm_stats  // second norm
                                 + mlp_hidden               // MLP hidden activations
                                 + rows * c;                // block output
  const std::int64_t chunk_input = rows * c;  // the embedding output on the first stage, else the one received
  const std::int64_t token_ids = first_stage ? bt : 0;                            // int32
  const std::int64_t head_and_loss = norm_output + norm_stats                     // final norm
                                     + bt * (padded_vocab(model.vocab, tp) / tp)  // probabilities
                                     + bt;                                        // per-token losses
  return chunk_input + token_ids + num_layers * per_layer + (last_stage ? head_and_loss : 0);
}

std::int64_t recompute_floats_per_microbatch(const ModelConfig& model, int micro_batch_size, bool first_stage,
                                             bool last_stage) {
  const std::int64_t bt = static_cast<std::int64_t>(micro_batch_size) * model.seq_len;
  return (first_stage ? bt : bt * model.d_model) + (last_stage ? bt : 0);
}

std::int64_t kept_grad_floats_per_microbatch(const ModelConfig& model, int micro_batch_size, int num_layers, int tp) {
  const std::int64_t bt = static_cast<std::int64_t>(micro_batch_size) * model.seq_len, c = model.d_model;
  const std::int64_t qkv_width =
      static_cast<std::int64_t>(model.heads + 2 * model.key_value_heads()) * model.head_dim() / tp;
  const std::int64_t mlp_inputs = mlp_input_products(model) * (model.mlp_hidden() / tp);
  return num_layers * bt * (2 * c + qkv_width + mlp_inputs);
}

std::int64_t workspace_floats(const ModelConfig& model, int micro_batch_size, int tp, bool sequence_parallel) {
  const std::int64_t bt = static_cast<std::int64_t>(micro_batch_size) * model.seq_len, c = model.d_model;
  const auto attention =
      static_cast<std::int64_t>(attention_scratch_floats(attention_heads(model, micro_batch_size, tp)));
  const std::int64_t mlp = bt * (model.mlp_hidden() / tp) * mlp_input_products(model);
  std::int64_t floats = 2 * bt * c + 4 * bt * c / tp + attention + mlp;
  if (sequence_parallel) floats += 2 * bt * c + bt * c / tp + 8 * c;
  return floats;
}

// Ring attention's own buffers (model/ring_attention.cpp), `model` holding the rank's seq_len / cp
// positions: the k | v chunks in hand and arriving, their gradient sums in hand and arriving, and a
// backward step's gradients (five [B, T, 2 · kv width]), one chunk pair's output, log-sum-exp and
// tiled-kernel scratch.
std::int64_t ring_floats(const ModelConfig& model, int micro_batch_size, int tp) {
  AttentionShape pair = attention_heads(model, micro_batch_size, tp);
  const std::int64_t kv = static_cast<std::int64_t>(micro_batch_size) * pair.T * 2 * pair.kv_heads * pair.head_dim;
  pair.B = 1;
  pair.T /= 2;
  return 5 * kv + static_cast<std::int64_t>(pair.T) * pair.heads * (pair.head_dim + 1) +
         static_cast<std::int64_t>(attention_scratch_floats(pair));
}

namespace {

// The deck's schedule, made once per shape (the planner asks for it per rank, and per candidate
// of a search).
const Schedule& planned_schedule(const Deck& deck) {
  const ScheduleConfig& s = deck.schedule;
  if (s.kind == ScheduleKind::file && s.from_file) return *s.from_file;
  using Key = std::tuple<ScheduleKind, int, int, int, double, double>;
  static std::map<Key, Schedule> made;
  const Key key{s.kind, deck.parallel.pp, s.microbatches, s.virtual_stages, s.activation_budget, s.auto_memory_limit};
  auto found = made.find(key);
  if (found == made.end()) found = made.emplace(key, deck_schedule(deck)).first;
  return found->second;
}

// What one micro-batch leaves on each of a rank's chunks, for the walks below.
struct ChunkBytes {
  std::int64_t stash = 0;   // the whole stash, from F (or, recomputing, from I) until W
  std::int64_t inputs = 0;  // full recomputation: the chunk's inputs, from F until I
  std::int64_t kept = 0;    // output gradients from I until W
};

// The most bytes of output gradients rank `rank` keeps between an I and its W.
std::int64_t kept_grads_peak(const Schedule& schedule, int rank, const std::vector<ChunkBytes>& chunks) {
  std::int64_t now = 0, peak = 0;
  for (const Action& action : schedule.actions[rank]) {
    if (action.kind == ActionKind::input_grad) now += chunks[action.chunk].kept;
    if (action.kind == ActionKind::weight_grad) now -= chunks[action.chunk].kept;
    peak = std::max(peak, now);
  }
  return peak;
}

// The most bytes of activations rank `rank` holds at once on a schedule that splits B.
std::int64_t walked_peak(const Schedule& schedule, int rank, const std::vector<ChunkBytes>& chunks, bool recompute) {
  std::int64_t now = 0, peak = 0;
  for (const Action& action : schedule.actions[rank]) {
    const ChunkBytes& chunk = chunks[action.chunk];
    switch (action.kind) {
      case ActionKind::forward: now += recompute ? chunk.inputs : chunk.stash; break;
      case ActionKind::input_grad: now += chunk.kept + (recompute ? chunk.stash - chunk.inputs : 0); break;
      case ActionKind::weight_grad: now -= chunk.kept + chunk.stash; break;
      case ActionKind::backward: now -= recompute ? chunk.inputs : chunk.stash; break;
    }
    peak = std::max(peak, now);
  }
  return peak;
}

// Schedules that split B: the kept gradients' peak, and the walked peak of everything.
void walk_split_backward(const Deck& deck, int rank, const std::vector<ChunkBytes>& chunks, RankMemory& memory) {
  const Schedule& schedule = planned_schedule(deck);
  if (!schedule.splits_backward() || schedule.chunks != static_cast<int>(chunks.size())) return;
  const bool recompute = deck.schedule.recompute == Recompute::full;
  memory.kept_grad_bytes = kept_grads_peak(schedule, rank, chunks);
  memory.walked_peak_bytes = walked_peak(schedule, rank, chunks, recompute);
  if (recompute) memory.recompute_bytes = 0;  // the walk holds the rebuilt stashes
}

// The model as one rank computes it: seq_len / cp positions of each sequence (its two chunks
// under context parallelism), where the parameters keep the whole sequence's position table.
ModelConfig rank_rows(const Deck& deck) {
  ModelConfig rows = deck.model;
  rows.seq_len /= deck.parallel.cp;
  return rows;
}

}  // namespace

bool planned_schedule_splits_backward(const Deck& deck) { return planned_schedule(deck).splits_backward(); }

RankMemory rank_memory(const Deck& deck, const std::vector<StageLayers>& stages, int rank) {
  const int tp = deck.parallel.tp;
  const int pp = deck.parallel.pp;
  const int last = static_cast<int>(stages.size()) - 1;
  const int mbs = deck.schedule.micro_batch_size;
  const bool recompute = deck.schedule.recompute == Recompute::full;
  const bool selective = deck.schedule.recompute == Recompute::selective;
  const ModelConfig rows = rank_rows(deck);
  RankMemory memory;
  memory.workspace_bytes = 4 * workspace_floats(rows, mbs, tp, deck.parallel.sequence_parallel);
  if (deck.parallel.cp > 1) memory.workspace_bytes += 4 * ring_floats(rows, mbs, tp);
  // Selective recomputation rebuilds one layer's explicit attention probabilities at a time, in one buffer.
  if (selective && deck.model.attention == AttentionKernel::explicit_probabilities)
    memory.recompute_bytes = 4 * static_cast<std::int64_t>(mbs) * (deck.model.heads / tp) * deck.model.seq_len *
                             deck.model.seq_len;
  const ChunkPlacement placement = chunk_placement(deck.schedule);
  const int chunks = static_cast<int>(stages.size()) / pp;
  std::vector<ChunkBytes> walk(chunks);
  bool holds_embedding = false;
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int stage = placed_virtual_stage(placement, pp, chunks, rank, chunk);
    const StageLayers& layers = stages.at(stage);
    const bool first = stage == 0;
    // A tied head on the rank that holds the embedding (a V) uses the same wte.
    const bool shared_wte = stage == last && last > 0 && holds_embedding && deck.model.tie_embeddings;
    holds_embedding |= first;
    walk[chunk].kept = 4 * kept_grad_floats_per_microbatch(rows, mbs, layers.num_layers, tp);
    const StageParams params = stage_params(deck.model, layers, first, stage == last, tp);
    memory.weight_bytes += 4 * (params.total() - (shared_wte ? params.head : 0));
    const std::int64_t stash =
        4 * activation_floats_per_microbatch(rows, mbs, layers.first_layer, layers.num_layers, first,
                                             stage == last, tp,
                                             {!selective, deck.parallel.sequence_parallel,
                                              deck.train.precision == MatmulPrecision::bf16});
    walk[chunk].stash = stash;
    walk[chunk].inputs = 4 * recompute_floats_per_microbatch(rows, mbs, first, stage == last);
    memory.activation_bytes_per_microbatch += recompute ? walk[chunk].inputs : stash;
    if (recompute) memory.recompute_bytes = std::max(memory.recompute_bytes, stash);
  }
  memory.grad_bytes = memory.weight_bytes;
  memory.optimizer_bytes = 2 * memory.weight_bytes;
  if (deck.train.precision == MatmulPrecision::bf16) memory.weight_copy_bytes = memory.weight_bytes / 2;
  if (deck.parallel.zero == 1) {  // sharded over the dp × cp replicas
    const int replicas = deck.parallel.dp * deck.parallel.cp;
    const std::vector<Bucket> buckets = plan_buckets(static_cast<std::size_t>(memory.weight_bytes / 4),
                                                     bucket_elements(deck.parallel.bucket_mb), replicas);
    memory.optimizer_bytes = 8 * static_cast<std::int64_t>(shard_size(buckets));
    memory.zero1_bytes = 4 * static_cast<std::int64_t>(zero1_gradient_floats(buckets, replicas));
  }
  memory.in_flight_microbatches = in_flight_microbatches(deck.schedule, rank, pp);
  walk_split_backward(deck, rank, walk, memory);
  return memory;
}

}  // namespace trident
