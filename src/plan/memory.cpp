#include "plan/memory.hpp"

#include <algorithm>
#include <cmath>
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

namespace {

// Floats a tensor only products read takes in the stash (kernels/gemm.hpp's rounding, per tensor).
std::int64_t product_input(std::int64_t elements, bool bf16) {
  return static_cast<std::int64_t>(product_input_floats(static_cast<std::size_t>(elements), bf16));
}

// One micro-batch's shapes on one TP rank, as the stash is carved (model/layer_context.hpp's StashShape).
struct StashRows {
  std::int64_t bt;    // the tensor-parallel region's rows: every position of the micro-batch
  std::int64_t rows;  // the residual stream's: bt, or bt / tp under sequence parallelism
  int tp;
  bool bf16;
};

// A dense MLP's share of a layer (post_attention norm on): the norm's output, which products only
// read, and its statistics; the input products' outputs (GPT-2's c_fc; Llama's gate | up) and the
// activation (GELU; silu(gate) · up), each F/tp wide.
std::int64_t dense_mlp_floats(const ModelConfig& model, const StashRows& s) {
  const std::int64_t width = s.bt * model.mlp_hidden() / s.tp;
  return product_input(s.rows * model.d_model, s.bf16) + norm_stats_per_row(model) * s.rows +
         mlp_input_products(model) * width + product_input(width, s.bf16);
}

// The most rows a rank's experts take in one micro-batch of `rows` rows: every rank of the ep group
// may route all its assignments to them, unless each expert's capacity (per micro-batch and source
// rank) caps them.
std::int64_t received_rows(const ModelConfig& model, std::int64_t rows, int ranks) {
  const std::int64_t assigned = rows * model.moe.top_k, experts = model.moe.experts;
  if (model.moe.capacity_factor <= 0) return assigned * ranks;
  const auto capacity =
      static_cast<std::int64_t>(std::ceil(model.moe.capacity_factor * static_cast<double>(assigned) / experts));
  return std::min(assigned * ranks, capacity * experts);
}

// A mixture's share of a layer (LlamaBlock::carve, then MoeStash::carve): the norm's output in fp32
// (the router's fp32 product reads it) and its statistics; then per row the router's softmax, per
// assignment (rows · top_k of them) the expert, its weight, its permutation row and back (integers,
// one word each); per expert the token count and the permutation's offsets (+1). Then per row its
// experts take (received_rows): the input (read by products only; fp32 as it arrives under expert
// parallelism), the w1 | w3 outputs, the activation (read by products only) and the output. Under
// expert parallelism also the rows each rank sends (E integers) and the outputs back (per
// assignment). Every TP rank holds the whole mixture: nothing is divided by tp.
std::int64_t mixture_floats(const ModelConfig& model, int layer, const StashRows& s, int ranks) {
  const std::int64_t c = model.d_model, f = model.expert_hidden(), experts = model.experts_in(layer);
  const std::int64_t assigned = s.rows * model.moe.top_k, taken = received_rows(model, s.rows, ranks);
  const bool split = ranks > 1;
  const std::int64_t norm = s.rows * c + norm_stats_per_row(model) * s.rows;
  const std::int64_t routing = s.rows * experts + 4 * assigned + 2 * experts + 1 + (split ? experts : 0);
  const std::int64_t input = split ? taken * c : product_input(taken * c, s.bf16);
  const std::int64_t experts_work = input + taken * 2 * f + product_input(taken * f, s.bf16) + taken * c;
  return norm + routing + experts_work + (split ? assigned * c : 0);
}

}  // namespace

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
  const std::int64_t qkv_width =
      static_cast<std::int64_t>(model.heads + 2 * model.key_value_heads()) * model.head_dim() / tp;
  // The residual stream's rows on this rank: all of them, or 1/tp under sequence parallelism.
  const StashRows s{bt, mode.sequence_parallel ? bt / tp : bt, tp, mode.bf16_product_inputs};
  // LayerNorm keeps mean and rstd per token, RMSNorm rstd only.
  const std::int64_t norm_stats = norm_stats_per_row(model) * s.rows;
  const AttentionShape heads = attention_heads(model, micro_batch_size, tp);
  const bool rebuilt = !mode.keep_probabilities && model.attention == AttentionKernel::explicit_probabilities;
  const std::int64_t attention_saved = rebuilt ? 0 : static_cast<std::int64_t>(attention_saved_floats(heads));

  // A norm's output is read by products only (gathered first under sequence parallelism).
  const std::int64_t norm_output = product_input(s.rows * c, s.bf16);
  // Every layer's, up to the second norm and from the block output on.
  const std::int64_t attention_part = norm_output + norm_stats  // first norm
                                      + bt * qkv_width           // q, k, v
                                      + attention_saved          // what attention keeps for backward
                                      + bt * c / tp              // attention output (before its projection)
                                      + s.rows * c               // residual after attention
                                      + s.rows * c;              // block output
  std::int64_t layers = 0;
  for (int layer = first_layer; layer < first_layer + num_layers; ++layer)
    layers += attention_part + (model.moe_layer(layer) ? mixture_floats(model, layer, s, mode.expert_ranks)
                                                       : dense_mlp_floats(model, s));
  const std::int64_t chunk_input = s.rows * c;  // the embedding output on the first stage, else the one received
  const std::int64_t token_ids = first_stage ? bt : 0;                            // int32
  const std::int64_t head_and_loss = norm_output + norm_stats                     // final norm
                                     + bt * (padded_vocab(model.vocab, tp) / tp)  // probabilities
                                     + bt;                                        // per-token losses
  return chunk_input + token_ids + layers + (last_stage ? head_and_loss : 0);
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

namespace {

// What model/moe_mlp.hpp's MoeContext allocates once per rank under [model.moe] (the mixture is
// whole on every TP rank): backward's scratch for one micro-batch of `rows` positions, the gradients
// of the experts' w1 | w3 outputs (2F per row the experts take) and of their inputs (C per row), of
// the router's logits (rows · E) and of the routing weights (rows · k); under expert parallelism the
// permuted rows on their way (rows · k · C) and the counts sent and received (2E); and the step's
// tokens per expert of every layer (layers · E).
std::int64_t mixture_workspace_floats(const ModelConfig& model, std::int64_t rows, int ranks) {
  const std::int64_t experts = model.moe.experts, k = model.moe.top_k;
  if (experts == 0) return 0;
  const std::int64_t taken = received_rows(model, rows, ranks);
  const std::int64_t backward = taken * 2 * model.expert_hidden() + taken * model.d_model + rows * experts + rows * k;
  const std::int64_t exchange = ranks > 1 ? rows * k * model.d_model + 2 * experts : 0;
  return backward + exchange + static_cast<std::int64_t>(model.layers) * experts;
}

}  // namespace

std::int64_t workspace_floats(const ModelConfig& model, int micro_batch_size, int tp, bool sequence_parallel,
                              int expert_ranks) {
  const std::int64_t bt = static_cast<std::int64_t>(micro_batch_size) * model.seq_len, c = model.d_model;
  const auto attention =
      static_cast<std::int64_t>(attention_scratch_floats(attention_heads(model, micro_batch_size, tp)));
  const std::int64_t mlp = bt * (model.mlp_hidden() / tp) * mlp_input_products(model);
  std::int64_t floats =
      2 * bt * c + 4 * bt * c / tp + attention + mlp + mixture_workspace_floats(model, bt, expert_ranks);
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

// The parameters of the experts this rank holds in `stage`'s mixtures (E / ep of each).
std::int64_t local_expert_params(const ModelConfig& model, const StageLayers& stage, int ep) {
  std::int64_t params = 0;
  for (int layer = stage.first_layer; layer < stage.end_layer(); ++layer)
    params += std::int64_t{model.experts_in(layer) / ep} * 3 * model.d_model * model.expert_hidden();
  return params;
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
  const int ep = deck.parallel.ep;
  memory.workspace_bytes = 4 * workspace_floats(rows, mbs, tp, deck.parallel.sequence_parallel, ep);
  if (deck.parallel.cp > 1) memory.workspace_bytes += 4 * ring_floats(rows, mbs, tp);
  // Selective recomputation rebuilds one layer's explicit attention probabilities at a time, in one buffer.
  if (selective && deck.model.attention == AttentionKernel::explicit_probabilities)
    memory.recompute_bytes = 4 * static_cast<std::int64_t>(mbs) * (deck.model.heads / tp) * deck.model.seq_len *
                             deck.model.seq_len;
  const ChunkPlacement placement = chunk_placement(deck.schedule);
  const int chunks = static_cast<int>(stages.size()) / pp;
  std::vector<ChunkBytes> walk(chunks);
  bool holds_embedding = false;
  std::int64_t expert_floats = 0;  // of the weights, the experts' (a mixture's, this rank's share)
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int stage = placed_virtual_stage(placement, pp, chunks, rank, chunk);
    const StageLayers& layers = stages.at(stage);
    const bool first = stage == 0;
    // A tied head on the rank that holds the embedding (a V) uses the same wte.
    const bool shared_wte = stage == last && last > 0 && holds_embedding && deck.model.tie_embeddings;
    holds_embedding |= first;
    walk[chunk].kept = 4 * kept_grad_floats_per_microbatch(rows, mbs, layers.num_layers, tp);
    const StageParams params = stage_params(deck.model, layers, first, stage == last, tp, ep);
    expert_floats += local_expert_params(deck.model, layers, ep);
    memory.weight_bytes += 4 * (params.total() - (shared_wte ? params.head : 0));
    const std::int64_t stash =
        4 * activation_floats_per_microbatch(rows, mbs, layers.first_layer, layers.num_layers, first,
                                             stage == last, tp,
                                             {!selective, deck.parallel.sequence_parallel,
                                              deck.train.precision == MatmulPrecision::bf16, ep});
    walk[chunk].stash = stash;
    walk[chunk].inputs = 4 * recompute_floats_per_microbatch(rows, mbs, first, stage == last);
    memory.activation_bytes_per_microbatch += recompute ? walk[chunk].inputs : stash;
    if (recompute) memory.recompute_bytes = std::max(memory.recompute_bytes, stash);
  }
  memory.grad_bytes = memory.weight_bytes;
  memory.optimizer_bytes = 2 * memory.weight_bytes;
  if (deck.train.precision == MatmulPrecision::bf16) memory.weight_copy_bytes = memory.weight_bytes / 2;
  if (deck.checkpoint.async) memory.checkpoint_copy_bytes = 3 * memory.weight_bytes;
  if (deck.parallel.zero == 1) {  // sharded over the dp × cp replicas; experts over those holding them
    const int replicas = deck.parallel.dp * deck.parallel.cp;
    const auto dense = static_cast<std::size_t>(memory.weight_bytes / 4 - expert_floats);
    const std::vector<Bucket> buckets =
        plan_buckets({{0, dense, replicas, false}, {dense, static_cast<std::size_t>(expert_floats), replicas / ep, true}},
                     bucket_elements(deck.parallel.bucket_mb));
    memory.optimizer_bytes = 8 * static_cast<std::int64_t>(shard_size(buckets));
    memory.zero1_bytes = 4 * static_cast<std::int64_t>(zero1_gradient_floats(buckets));
  }
  memory.in_flight_microbatches = in_flight_microbatches(deck.schedule, rank, pp);
  walk_split_backward(deck, rank, walk, memory);
  return memory;
}

}  // namespace trident
