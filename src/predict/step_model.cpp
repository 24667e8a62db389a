#include "predict/step_model.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "family/family.hpp"
#include "plan/layout.hpp"
#include "plan/memory.hpp"
#include "plan/model_size.hpp"
#include "plan/partition.hpp"
#include "plan/schedule_report.hpp"

namespace trident {
namespace {

// Time of one pass (an F, I or W of one micro-batch) split by what bounds it: comm is the TP
// collectives', ring the CP ring's hops that the attention in hand does not hide, all_to_all a
// mixture's expert-parallel exchanges.
struct PassTime {
  double gemm = 0.0, elementwise = 0.0, comm = 0.0, ring = 0.0, all_to_all = 0.0;
  double total() const { return gemm + elementwise + comm + ring + all_to_all; }
  PassTime& operator+=(const PassTime& other) {
    gemm += other.gemm;
    elementwise += other.elementwise;
    comm += other.comm;
    ring += other.ring;
    all_to_all += other.all_to_all;
    return *this;
  }
  PassTime scaled(double count) const {
    return {gemm * count, elementwise * count, comm * count, ring * count, all_to_all * count};
  }
};

struct PieceTime {  // a layer, the embedding or the head
  PassTime forward, input_grad, weight_grad;
};

// What the costs of one micro-batch depend on: the deck, the machine, and the links its groups use.
struct CostContext {
  const Deck& deck;
  const Machine& machine;
  double peak = 0.0;
  double element_bytes = 4.0;
  Link tp_link, cp_link, pp_link, dp_link, embedding_link;

  int tp() const { return deck.parallel.tp; }
  int cp() const { return deck.parallel.cp; }
  // A rank's rows of a micro-batch: seq_len / cp positions of each sequence.
  double rows() const { return static_cast<double>(deck.schedule.micro_batch_size) * deck.model.seq_len / cp(); }
  // The residual stream's rows on one TP rank: all of them, or 1/tp under sequence parallelism.
  double stream_rows() const { return deck.parallel.sequence_parallel ? rows() / tp() : rows(); }
  double gemm(double m, double n, double k, double count = 1.0) const {
    return count * machine.gemm_seconds(2.0 * m * n * k, peak);
  }
  double traffic(double elements, double passes, double bytes) const {
    return machine.kernel_seconds(elements * passes * bytes, 0.0);
  }
  // A ring all-reduce of `bytes` over the TP group (or the all-gather + reduce-scatter pair that
  // sequence parallelism moves instead: the same bytes on the wire).
  double tp_all_reduce(double bytes) const { return ring_all_reduce(bytes, tp(), tp_link); }
  static double ring_all_reduce(double bytes, int ranks, const Link& link) {
    if (ranks <= 1) return 0.0;
    return 2.0 * (ranks - 1) / ranks * bytes / link.bandwidth + 2.0 * (ranks - 1) * link.latency;
  }
  // A mixture's all-to-all over the ep group of what a rank's `rows` assignments send (balanced
  // routing: (ep − 1) / ep of them leave), on the replicas' link (the ep ranks are data-parallel ones).
  double ep_all_to_all(double rows) const {
    const int ep = deck.parallel.ep;
    if (ep <= 1) return 0.0;
    const double bytes = rows * deck.model.d_model * 4.0 * (ep - 1) / ep;  // fp32 rows
    return bytes / dp_link.bandwidth + (ep - 1) * dp_link.latency;
  }
  // One hop of the CP ring: a rank's k | v chunks (this TP rank's kv heads) to its neighbour.
  double ring_hop() const {
    const ModelConfig& model = deck.model;
    const double kv_bytes = rows() * 2.0 * model.key_value_heads() / tp() * model.head_dim() * element_bytes;
    return cp_link.latency + kv_bytes / cp_link.bandwidth;
  }
};

// A rank's queries (seq_len / cp of each sequence, its two balanced chunks under CP) against the
// keys at or before them.
PassTime attention_core_forward(const CostContext& c) {
  const ModelConfig& model = c.deck.model;
  const double heads = static_cast<double>(model.heads) / c.tp();
  const double t = model.seq_len, hd = model.head_dim();
  const bool tiled = model.attention == AttentionKernel::tiled;
  const double causal = tiled ? 0.5 : 1.0;  // the tiled kernel skips the masked tiles
  const double products = c.deck.schedule.micro_batch_size * heads;
  PassTime time;
  time.gemm = c.gemm(t / c.cp() * causal, t, hd, 2.0 * products);  // scores and values, per sequence and head
  if (!tiled) time.elementwise = c.traffic(products * t * t, 2.0, c.element_bytes);  // the softmax
  return time;
}

// What the CP ring's hops add to a layer's attention (model/ring_attention.hpp): of its cp steps,
// each of the first cp − 1 posts the hop of the keys in hand before their attention, so a hop shows
// only where it outlasts a step's share of the core. Backward's steps (each twice forward's share)
// carry the keys' hop and the hop of the gradient sums one step behind: step 0 the keys', steps 1
// to cp − 2 both, step cp − 1 the sums'; the last hop of sums, after the last step, shows whole.
std::pair<double, double> ring_exposed(const CostContext& c, const PassTime& core) {
  if (c.cp() == 1) return {0.0, 0.0};
  const double hop = c.ring_hop(), steps = c.cp(), share = core.total() / steps;
  const auto shows = [](double hops, double attention) { return std::max(0.0, hops - attention); };
  const double forward = (steps - 1) * shows(hop, share);
  const double backward = 2.0 * shows(hop, 2.0 * share) + (steps - 2) * shows(2.0 * hop, 2.0 * share) + hop;
  return {forward, backward};
}

// A layer's MLP, forward: its products and the traffic of its activations. Dense: the input product
// (Llama's gate | up as one) and the output one, split over TP. A mixture ([model.moe]): the router
// and, per expert, the pair over its share of the rows' k assignments (balanced), every TP rank
// computing all of it; the permutation's gather and weighted sum move k rows per token.
PassTime mlp_forward(const CostContext& c, bool mixture) {
  const ModelConfig& model = c.deck.model;
  const double rows = c.rows(), d = model.d_model;
  if (!mixture) {
    const double ffn = static_cast<double>(model.mlp_hidden()) / c.tp(), inputs = mlp_input_products(model);
    return {c.gemm(rows, inputs * ffn, d) + c.gemm(rows, d, ffn), c.traffic(rows * ffn, inputs + 1.0, c.element_bytes)};
  }
  const double experts = model.moe.experts, ffn = model.expert_hidden(), assigned = rows * model.moe.top_k;
  const double per_expert = assigned / experts;
  return {c.gemm(rows, experts, d) + experts * (c.gemm(per_expert, 2.0 * ffn, d) + c.gemm(per_expert, d, ffn)),
          c.traffic(assigned * ffn, 3.0, c.element_bytes) + c.traffic(assigned * d, 4.0, c.element_bytes)};
}

PieceTime layer_time(const CostContext& c, bool mixture) {
  const ModelConfig& model = c.deck.model;
  const double rows = c.rows(), d = model.d_model, hd = model.head_dim();
  const double qkv = (model.heads + 2.0 * model.key_value_heads()) * hd / c.tp();
  const double inner = model.heads * hd / c.tp();
  // One product each: q | k | v and the attention's output projection; then the MLP's.
  const PassTime mlp = mlp_forward(c, mixture);
  const double weight_gemms = c.gemm(rows, qkv, d) + c.gemm(rows, d, inner) + mlp.gemm;
  PieceTime layer;
  const PassTime core = attention_core_forward(c);
  const double activations = c.traffic(c.stream_rows() * d, 10.0, c.element_bytes) + mlp.elementwise;
  // The row-parallel outputs' sums: attention's and a dense MLP's (a mixture is whole on every TP rank).
  const double all_reduce = c.tp_all_reduce(rows * d * c.element_bytes), reductions = mixture ? 1.0 : 2.0;
  const auto [ring_forward, ring_backward] = ring_exposed(c, core);
  // A mixture's rows out and back, in forward and (their gradients) in backward.
  const double all_to_all = mixture ? 2.0 * c.ep_all_to_all(rows * model.moe.top_k) : 0.0;
  layer.forward = {weight_gemms + core.gemm, activations + core.elementwise, reductions * all_reduce, ring_forward,
                   all_to_all};
  layer.input_grad = {weight_gemms + 2.0 * core.gemm, 2.0 * (activations + core.elementwise),
                      reductions * all_reduce, ring_backward, all_to_all};
  layer.weight_grad = {weight_gemms, 0.0, c.deck.parallel.sequence_parallel ? all_reduce : 0.0};
  if (c.deck.schedule.recompute == Recompute::selective) layer.input_grad += core;
  return layer;
}

PieceTime embedding_time(const CostContext& c) {
  const double elements = c.stream_rows() * c.deck.model.d_model;
  PieceTime embedding;
  embedding.forward = {0.0, c.traffic(elements, 3.0, c.element_bytes),
                       c.tp_all_reduce(c.rows() * c.deck.model.d_model * c.element_bytes)};
  embedding.weight_grad = {0.0, c.traffic(elements, 3.0, c.element_bytes), 0.0};
  return embedding;
}

PieceTime head_time(const CostContext& c) {
  const double rows = c.rows(), d = c.deck.model.d_model;
  const double vocab = static_cast<double>(padded_vocab(c.deck.model.vocab, c.tp())) / c.tp();
  const double logits = c.gemm(rows, vocab, d);
  const double norm = c.traffic(c.stream_rows() * d, 2.0, c.element_bytes);
  const double loss = c.traffic(rows * vocab, 3.0, 4.0);  // fp32 logits: softmax, loss, gradient
  PieceTime head;
  head.forward = {logits, norm + loss, 0.0};
  head.input_grad = {logits, 2.0 * norm, c.tp_all_reduce(rows * d * c.element_bytes)};
  head.weight_grad = {logits, 0.0, 0.0};
  return head;
}

// One micro-batch's F, B, I and W on a virtual stage, and the TP collectives', the CP ring's and
// the EP all-to-alls' share of them.
struct StageTimes {
  ActionCosts::Stage costs;
  double tp_comm = 0.0, cp_comm = 0.0, ep_comm = 0.0;
};

StageTimes stage_times(const CostContext& c, const StageLayers& layers, bool first, bool last) {
  PieceTime stage;
  const PieceTime dense = layer_time(c, false), mixture = layer_time(c, true);
  const auto add = [&stage](const PieceTime& piece, double count) {
    for (auto [to, from] : {std::pair{&stage.forward, &piece.forward}, std::pair{&stage.input_grad, &piece.input_grad},
                            std::pair{&stage.weight_grad, &piece.weight_grad}})
      *to += from->scaled(count);
  };
  for (int layer = layers.first_layer; layer < layers.end_layer(); ++layer)
    add(c.deck.model.moe_layer(layer) ? mixture : dense, 1.0);
  if (first) add(embedding_time(c), 1.0);
  if (last) add(head_time(c), 1.0);
  if (c.deck.schedule.recompute == Recompute::full) stage.input_grad += stage.forward;  // the chunk's, head included
  const double input_grad = stage.input_grad.total(), weight_grad = stage.weight_grad.total();
  return {{stage.forward.total(), input_grad + weight_grad, input_grad, weight_grad},
          stage.forward.comm + stage.input_grad.comm + stage.weight_grad.comm,
          stage.forward.ring + stage.input_grad.ring + stage.weight_grad.ring,
          stage.forward.all_to_all + stage.input_grad.all_to_all};
}

// An [emulate] deck's actions sleep what it says, whatever the machine.
StageTimes emulated_times(const EmulateConfig& e) {
  return {{e.forward_ms / 1e3, e.backward_ms / 1e3, e.input_grad_ms / 1e3, e.weight_grad_ms / 1e3}, 0.0, 0.0, 0.0};
}

// The link a group of world ranks uses: the inter-node one when any group along `axis` spans nodes.
Link axis_link(const Deck& deck, const Machine& machine, Axis axis) {
  for (const std::vector<int>& group : axis_groups(axis, deck.parallel)) {
    const int node = group.front() / machine.devices_per_node;
    for (int rank : group)
      if (rank / machine.devices_per_node != node) return machine.inter_node;
  }
  return machine.intra_node;
}

// The link of the dp × cp ranks that reduce the gradients: the inter-node one when either axis
// leaves a node.
Link replicas_link(const Deck& deck, const Machine& machine) {
  const Link dp = axis_link(deck, machine, Axis::dp), cp = axis_link(deck, machine, Axis::cp);
  return dp.bandwidth <= cp.bandwidth ? dp : cp;
}

CostContext cost_context(const Deck& deck, const Machine& machine) {
  const int last_stage = coords_to_rank({.pp = deck.parallel.pp - 1}, deck.parallel);
  return {deck,
          machine,
          machine.peak_flops(deck.train.precision),
          deck.train.precision == MatmulPrecision::bf16 ? 2.0 : 4.0,
          axis_link(deck, machine, Axis::tp),
          axis_link(deck, machine, Axis::cp),
          axis_link(deck, machine, Axis::pp),
          replicas_link(deck, machine),
          last_stage / machine.devices_per_node == 0 ? machine.intra_node : machine.inter_node};
}

// The data-parallel reduction and the optimizer after the pipeline, on the slowest pipeline rank.
void add_after_pipeline(StepPrediction& p, const CostContext& c, const std::vector<StageLayers>& stages) {
  const Deck& deck = c.deck;
  const ChunkPlacement placement = p.schedule.placement;
  const int dp = deck.parallel.dp * deck.parallel.cp;  // the gradients' replicas
  double slowest = 0.0;
  const int chunks = static_cast<int>(stages.size()) / deck.parallel.pp;
  for (int rank = 0; rank < deck.parallel.pp; ++rank) {
    // A tied head on the rank that holds the embedding (a V) shares its gradients.
    const double parameters = static_cast<double>(rank_memory(deck, stages, rank).weight_bytes / 4);
    const double gradient_bytes = parameters * 4.0;
    double last_backward = 0.0;  // the reduction runs behind the last micro-batch's backward
    for (int chunk = 0; chunk < chunks; ++chunk)
      last_backward +=
          p.costs.per_virtual_stage[placed_virtual_stage(placement, deck.parallel.pp, chunks, rank, chunk)].backward;
    const double all_reduce = CostContext::ring_all_reduce(gradient_bytes, dp, c.dp_link);
    const double exposed = deck.parallel.zero == 1 ? std::max(0.0, all_reduce / 2 - last_backward) + all_reduce / 2
                                                   : std::max(0.0, all_reduce - last_backward);
    const double optimizer = parameters / (deck.parallel.zero == 1 ? dp : 1) * 28.0 / c.machine.memory_bandwidth;
    if (exposed + optimizer > slowest) {
      slowest = exposed + optimizer;
      p.dp_exposed_s = exposed;
      p.optimizer_s = optimizer;
    }
  }
  const bool tied_copies =
      deck.model.tie_embeddings && deck.parallel.pp > 1 && placement == ChunkPlacement::interleaved;
  if (tied_copies) {
    const double wte_bytes =
        static_cast<double>(padded_vocab(deck.model.vocab, c.tp())) / c.tp() * deck.model.d_model * 4.0;
    p.embedding_sync_s = CostContext::ring_all_reduce(wte_bytes, 2, c.embedding_link);
  }
}

}  // namespace

StepPrediction predict_step(const Deck& deck, const Machine& machine) {
  StepPrediction p;
  p.schedule = deck_schedule(deck);
  Deck planned = deck;  // the partition and memory of the schedule that runs (auto's choice)
  planned.schedule.kind = p.schedule.kind;
  planned.schedule.virtual_stages = p.schedule.chunks;
  const std::vector<StageLayers> stages = partition_layers(planned.model, planned.parallel, p.schedule.chunks);
  const CostContext c = cost_context(planned, machine);
  std::vector<double> rank_tp_comm(deck.parallel.pp, 0.0), rank_cp_comm(deck.parallel.pp, 0.0),
      rank_ep_comm(deck.parallel.pp, 0.0);
  for (std::size_t vs = 0; vs < stages.size(); ++vs) {
    const StageTimes times = deck.emulate.enabled ? emulated_times(deck.emulate)
                                                  : stage_times(c, stages[vs], vs == 0, vs + 1 == stages.size());
    p.costs.per_virtual_stage.push_back(times.costs);
    const int rank = chunk_position(p.schedule.placement, deck.parallel.pp, static_cast<int>(vs)).rank;
    rank_tp_comm[rank] += times.tp_comm * deck.schedule.microbatches;
    rank_cp_comm[rank] += times.cp_comm * deck.schedule.microbatches;
    rank_ep_comm[rank] += times.ep_comm * deck.schedule.microbatches;
  }
  p.tp_comm_s = *std::max_element(rank_tp_comm.begin(), rank_tp_comm.end());
  p.cp_comm_s = *std::max_element(rank_cp_comm.begin(), rank_cp_comm.end());
  p.ep_comm_s = *std::max_element(rank_ep_comm.begin(), rank_ep_comm.end());
  const double message_bytes = c.stream_rows() * deck.model.d_model * c.element_bytes;
  p.costs.p2p_latency = deck.parallel.pp > 1 ? c.pp_link.latency + message_bytes / c.pp_link.bandwidth : 0.0;
  const SimulatedStep simulated = simulate(p.schedule, p.costs);
  p.pipeline_s = simulated.step_time;
  p.bubble = simulated.bubble;
  add_after_pipeline(p, c, stages);
  p.step_time_s = p.pipeline_s + p.embedding_sync_s + p.dp_exposed_s + p.optimizer_s;
  p.tokens_per_s = static_cast<double>(deck.tokens_per_step()) / p.step_time_s;
  p.flops_per_step = model_flops_per_step(deck.model, deck.tokens_per_step());
  p.flops_per_device = p.flops_per_step / p.step_time_s / deck.parallel.world_size();
  p.mfu = p.flops_per_device / c.peak;
  p.fits = true;
  for (int rank = 0; rank < deck.parallel.pp; ++rank) {
    p.memory_per_rank_bytes.push_back(rank_memory(planned, stages, rank).total_bytes());
    p.fits = p.fits && static_cast<double>(p.memory_per_rank_bytes.back()) <= machine.device_memory_bytes;
  }
  return p;
}

}  // namespace trident
