#include "plan/report.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "family/family.hpp"
#include "plan/cp_traffic.hpp"
#include "plan/ep_traffic.hpp"
#include "plan/layout.hpp"
#include "plan/memory.hpp"
#include "plan/model_size.hpp"
#include "plan/partition.hpp"
#include "plan/pipeline_theory.hpp"
#include "plan/text_table.hpp"
#include "plan/tp_traffic.hpp"
#include "plan/units.hpp"

namespace trident {
namespace {

// Grids up to this size get one row per rank; larger ones the first and last rows and the groups.
constexpr int kFullRankTableLimit = 64;
constexpr int kRankRowsAtEachEnd = 8;
// Groups listed per axis before eliding the middle ones.
constexpr std::size_t kGroupsShown = 3;

using Fields = std::vector<std::pair<std::string, std::string>>;

void print_fields(std::ostream& out, const Fields& fields) {
  std::size_t key_width = 0;
  for (const auto& [key, value] : fields) key_width = std::max(key_width, key.size());
  for (const auto& [key, value] : fields) {
    out << "  " << key << std::string(key_width - key.size() + 2, ' ') << value << '\n';
  }
}

std::string str(std::int64_t value) { return std::to_string(value); }

std::string exact_and_human(std::int64_t count) {
  return with_thousands(count) + " (" + human_count(static_cast<double>(count)) + ")";
}

std::string layer_range(const StageLayers& stage) {
  const int last = stage.end_layer() - 1;
  return stage.num_layers == 1 ? str(last) : str(stage.first_layer) + "-" + str(last);
}

// The layer ranges of all of a rank's chunks: "0-1" or, interleaved, "0-1,4-5".
std::string rank_layer_ranges(const std::vector<StageLayers>& stages, int pp, ChunkPlacement placement, int rank) {
  std::string text;
  for (const StageLayers& chunk : rank_chunks(stages, pp, placement, rank)) {
    if (!text.empty()) text += ',';
    text += layer_range(chunk);
  }
  return text;
}

std::string fixed(double value, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// Whole numbers as such ("16"), fractions with two decimals ("5.50").
std::string count_text(double value) {
  return value == static_cast<double>(static_cast<std::int64_t>(value)) ? str(static_cast<std::int64_t>(value))
                                                                         : fixed(value, 2);
}

// Chunks per rank that the plan partitions for. "auto" picks its chunks by simulating schedules
// (the schedule module, which plan cannot use): planned as one chunk unless the caller resolved it.
int planned_chunks(const ScheduleConfig& schedule) {
  return schedule.kind == ScheduleKind::automatic ? 1 : schedule.virtual_stages;
}

// The deck's grid, with dp derived from `ranks` when the user asked for another world size.
Deck deck_for_world_size(const Deck& deck, int ranks, std::vector<std::string>& notes) {
  const ParallelConfig& grid = deck.parallel;
  if (ranks == grid.world_size()) return deck;
  const bool cp = grid.cp > 1;
  const int fixed = grid.tp * grid.cp * grid.pp;  // the ranks of one data-parallel replica
  const std::string keys = cp ? "parallel.tp x parallel.cp x parallel.pp" : "parallel.tp x parallel.pp";
  const std::string sizes = str(grid.tp) + " x " + (cp ? str(grid.cp) + " x " : "") + str(grid.pp);
  if (ranks < 1 || ranks % fixed != 0) {
    throw InputError("--ranks " + str(ranks) + " does not fit the grid of " + deck.path +
                     ": the rank count must be a multiple of " + keys + " = " + sizes + " = " + str(fixed) +
                     " (dp = ranks / " + str(fixed) + "); valid --ranks are " + str(fixed) + ", " + str(2 * fixed) +
                     ", " + str(3 * fixed) + ", ... (the deck itself gives " + str(grid.world_size()) +
                     "), or change " + (cp ? "parallel.tp / parallel.cp / parallel.pp" : "parallel.tp / parallel.pp"));
  }
  Deck derived = deck;
  derived.parallel.dp = ranks / fixed;
  notes.push_back("--ranks " + str(ranks) + " differs from the deck's " + (cp ? "tp x cp x pp x dp" : "tp x pp x dp") +
                  " = " + str(grid.world_size()) + ": planning with dp = " + str(ranks) + " / (tp " + str(grid.tp) +
                  (cp ? " x cp " + str(grid.cp) : "") + " x pp " + str(grid.pp) + ") = " + str(derived.parallel.dp));
  return derived;
}

void print_model(std::ostream& out, const ModelConfig& model, int tp) {
  const std::int64_t padded = padded_vocab(model.vocab, tp);
  const std::string vocab = padded == model.vocab
                                ? str(model.vocab)
                                : str(model.vocab) + " (padded to " + str(padded) +
                                      " for the vocab-parallel split across tp " + str(tp) + ")";
  const FamilyDescription& family = family_of(model);
  out << "\nModel (" << family.title << ")\n";
  Fields fields = {{"layers L", str(model.layers)},
                   {"d_model C", str(model.d_model)},
                   {"heads H", str(model.heads) + " (head_dim " + str(model.head_dim()) + ")"}};
  if (family.reads_key("kv_heads")) {
    fields.push_back({"kv_heads KV", str(model.key_value_heads()) +
                                         (model.key_value_heads() < model.heads
                                              ? " (grouped-query: " + str(model.heads / model.key_value_heads()) +
                                                    " query heads per kv head)"
                                              : "")});
  }
  const char* mlp = family.mlp == MlpKind::swiglu ? " (SwiGLU)" : " (GELU)";
  fields.push_back({"ffn_hidden F", str(model.mlp_hidden()) + mlp});
  if (const MoeConfig& moe = model.moe; moe.experts > 0)
    fields.push_back({"mixture of experts",
                      str(moe.experts) + " experts of F " + str(model.expert_hidden()) + ", top " + str(moe.top_k) +
                          ", in " + str(model.moe_layers()) + " of " + str(model.layers) + " layers (" +
                          (moe.capacity_factor > 0 ? "capacity factor " + count_text(moe.capacity_factor)
                                                   : std::string("dropless")) +
                          ", aux loss coef " + count_text(moe.aux_loss_coef) + ")"});
  fields.push_back({"seq_len T", str(model.seq_len) + (family.rotary() ? " (RoPE, theta " +
                                                                             count_text(model.rope_theta) + ")"
                                                                       : "")});
  fields.push_back({"vocab V", vocab});
  fields.push_back({"tie_embeddings", model.tie_embeddings ? "true" : "false"});
  print_fields(out, fields);
}

// "wte" for "wte.weight": the tensor, as the stage table names what a stage holds.
std::string without_weight(std::string_view name) {
  constexpr std::string_view suffix = ".weight";
  if (name.ends_with(suffix)) name.remove_suffix(suffix.size());
  return std::string(name);
}

std::string stage_contents(const ModelConfig& model, const StageLayers& stage, bool first,
                           bool last) {
  const FamilyDescription& family = family_of(model);
  std::string text;
  if (first)
    for (const TensorSpec& tensor : input_tensors(model)) text += without_weight(tensor.name) + ", ";
  const std::string layer(family.layer_prefix);
  text += stage.num_layers == 1 ? layer + str(stage.first_layer)
                                : layer + str(stage.first_layer) + "-" + layer + str(stage.end_layer() - 1);
  if (last) {
    text += ", " + std::string(family.final_norm);
    if (!model.tie_embeddings) {
      text += ", " + without_weight(kUntiedHead);
    } else if (!first) {
      text += ", head (" + without_weight(family.embedding) + " copy)";
    }
  }
  return text;
}

std::string split_title(const Deck& deck, int pieces) {
  const ParallelConfig& parallel = deck.parallel;
  if (!parallel.stage_layers.empty()) return "explicit parallel.stage_layers";
  if (parallel.stage_layers_balanced) {
    const ForwardFlops flops = forward_flops_per_token(deck.model);
    const double embedding = flops.embedding / flops.layer;
    return "balanced for compute: ln_f + head + loss weigh " + fixed(flops.head / flops.layer, 2) +
           " layers, the embedding " + (embedding < 0.01 ? "< 0.01" : fixed(embedding, 2));
  }
  return "uniform split: the first L mod " + str(pieces) + " stages get one extra layer";
}

void print_parameters(std::ostream& out, const Deck& deck, const std::vector<StageLayers>& stages) {
  const ModelConfig& model = deck.model;
  const int tp = deck.parallel.tp;
  const int pp = deck.parallel.pp;
  const bool interleaved = static_cast<int>(stages.size()) > pp;  // several chunks per rank
  const ChunkPlacement placement = chunk_placement(deck.schedule);
  out << "\nParameters\n";
  Fields counts = {
      {"total", exact_and_human(total_params(model)) + (model.tie_embeddings ? ", tied head counted once" : "")},
      {"non-embedding", exact_and_human(non_embedding_params(model)) + ", blocks + final norm"}};
  if (model.moe.experts > 0)
    counts.push_back({"active per token", exact_and_human(active_params(model)) + ", the top " +
                                              str(model.moe.top_k) + " experts of each mixture; FLOPs count these"});
  print_fields(out, counts);

  out << "\nStages (" << split_title(deck, static_cast<int>(stages.size())) << ")\n";
  if (interleaved) {
    out << "  " << stages.size() << " virtual stages in model order; "
        << (placement == ChunkPlacement::v_shape ? "a V: rank r holds virtual stages r and 2 pp - 1 - r\n"
                                                 : "virtual stage i is chunk i / pp of rank i mod pp\n");
  }
  std::vector<std::string> headers = {"stage", "layers", "holds", "compute", "params",
                                      "per TP rank (tp " + str(tp) + ")"};
  if (interleaved) headers.insert(headers.begin() + 1, "rank.chunk");
  TextTable table(headers, interleaved ? 4 : 3);
  const double layer_flops = forward_flops_per_token(model).layer;
  const int last = static_cast<int>(stages.size()) - 1;
  for (int s = 0; s <= last; ++s) {
    const bool first_stage = s == 0;
    const bool last_stage = s == last;
    std::vector<std::string> row = {
        str(s), layer_range(stages[s]), stage_contents(model, stages[s], first_stage, last_stage),
        fixed(stage_forward_flops_per_token(model, stages[s], first_stage, last_stage) / layer_flops, 2),
        exact_and_human(stage_params(model, stages[s], first_stage, last_stage).total()),
        exact_and_human(stage_params(model, stages[s], first_stage, last_stage, tp).total())};
    const ChunkPosition position = chunk_position(placement, pp, s);
    if (interleaved) row.insert(row.begin() + 1, str(position.rank) + "." + str(position.chunk));
    table.add_row(std::move(row));
  }
  table.print(out);
  out << "  compute: forward FLOPs per token in layers (embedding and ln_f + head + loss included)\n";
  if (interleaved) {
    for (int rank = 0; rank < pp; ++rank) {
      int layers = 0;
      for (const StageLayers& chunk : rank_chunks(stages, pp, placement, rank)) layers += chunk.num_layers;
      out << "  rank " << rank << ": layers " << rank_layer_ranges(stages, pp, placement, rank) << " (" << layers
          << ")\n";
    }
  }
  const std::string embedding = without_weight(family_of(model).embedding);
  if (model.tie_embeddings && last > 0 && chunk_position(placement, pp, last).rank == 0) {
    out << "  The tied head (stage " << last << ") is on rank 0 with the embedding: one " << embedding << ", no sum.\n";
  } else if (model.tie_embeddings && last > 0) {
    out << "  The tied head stores a second copy of " << embedding << " on stage " << last
        << "; its gradient is summed\n  with stage 0's before the optimizer step.\n";
  }
  if (tp > 1) {
    std::string split(family_of(model).tp_split);
    for (std::size_t at = split.find('\n'); at != std::string::npos; at = split.find('\n', at + 3))
      split.replace(at, 1, "\n  ");
    out << "  Per TP rank: " << split << ".\n";
  }
}

void print_step(std::ostream& out, const Deck& deck) {
  const std::int64_t tokens = deck.tokens_per_step();
  const double flops = model_flops_per_step(deck.model, tokens);
  char scientific[32];
  std::snprintf(scientific, sizeof scientific, "%.4g", flops);
  out << "\nStep\n";
  print_fields(out, {{"global batch", str(deck.global_batch_sequences()) +
                                          " sequences = micro_batch_size " +
                                          str(deck.schedule.micro_batch_size) + " x microbatches " +
                                          str(deck.schedule.microbatches) + " x dp " +
                                          str(deck.parallel.dp)},
                     {"tokens per step", with_thousands(tokens) + " = global batch x seq_len " +
                                             str(deck.model.seq_len)},
                     {"FLOPs per step", human_flops(flops) + " (" + scientific + ")"},
                     {"FLOPs formula", "6*N_nonembedding*tokens + 6*V*C*tokens + 6*L*T*C*tokens"},
                     {"", "(= 6NBT + 6VCBT + 6LBT^2C for B sequences; forward + backward)"}});
}

void print_schedule(std::ostream& out, const Deck& deck) {
  const ScheduleConfig& schedule = deck.schedule;
  const int p = deck.parallel.pp;
  const int m = schedule.microbatches;
  const int v = planned_chunks(schedule);
  const ScheduleType* type = find_schedule_type(schedule.kind);  // none for auto and a file
  const BubbleTheory theory = type ? type->bubble : BubbleTheory::below_textbook;
  std::string bubble = percent(theoretical_bubble(p, m)) + " = (p-1)/(m+p-1) = " + str(p - 1) + "/" +
                       str(m + p - 1) + " (gpipe/1f1b formula)";
  if (theory == BubbleTheory::interleaved) {
    bubble = percent(theoretical_bubble(p, m, v)) + " = (p-1)/(v*m+p-1) = " + str(p - 1) + "/" +
             str(v * m + p - 1) + " (interleaved, Megatron)";
  } else if (theory == BubbleTheory::below_textbook) {
    bubble = "below 1f1b's " + percent(theoretical_bubble(p, m)) + " = (p-1)/(m+p-1) = " + str(p - 1) + "/" +
             str(m + p - 1) + " (simulated in the schedule table)";
  }
  std::string kind = word_of(schedule.kind);
  if (schedule.kind == ScheduleKind::automatic) {
    kind += " (the lowest simulated bubble within " +
            (schedule.auto_memory_limit > 0 ? count_text(schedule.auto_memory_limit) : str(p)) +
            " micro-batches of activations, up to " + str(schedule.virtual_stages) + " chunks per rank)";
  }
  Fields fields = {{"kind", kind},
                   {"stages p", str(p)},
                   {"micro-batches m", str(m) + " (micro_batch_size " + str(schedule.micro_batch_size) + ")"},
                   {"virtual stages", str(v) + (v > 1 ? " chunks per rank" : "")},
                   {"bubble (theory)", bubble}};
  if (schedule.recompute == Recompute::full) {
    fields.push_back({"recompute", "full: keep each chunk's input, recompute the rest before its backward"});
  } else if (schedule.recompute == Recompute::selective) {
    fields.push_back({"recompute", deck.model.attention == AttentionKernel::tiled
                                       ? "selective: tiled attention keeps no probabilities, so nothing is dropped"
                                       : "selective: the attention probabilities are not stashed, each layer's "
                                         "backward recomputes them from q and k"});
  }
  out << "\nSchedule\n";
  print_fields(out, fields);
}

// What the memory table adds to the stashes in flight: RankMemory::recompute_bytes.
std::string recomputed_memory_note(Recompute recompute, AttentionKernel attention) {
  switch (recompute) {
    case Recompute::full: return " + one chunk recomputed";
    case Recompute::selective:
      if (attention == AttentionKernel::explicit_probabilities)
        return " + one layer's attention probabilities, recomputed";
      break;
    case Recompute::none: break;
  }
  return "";
}

std::string attention_memory_note(AttentionKernel attention) {
  return attention == AttentionKernel::tiled ? "; tiled attention: one log-sum-exp per row, linear in seq_len"
                                             : "; explicit attention: B x heads/tp x seq_len^2 probabilities per layer";
}

void print_memory(std::ostream& out, const Deck& deck, const std::vector<StageLayers>& stages) {
  const bool interleaved = static_cast<int>(stages.size()) > deck.parallel.pp;
  const bool zero1 = deck.parallel.zero == 1;
  const bool bf16 = deck.train.precision == MatmulPrecision::bf16;
  out << "\nMemory per rank (fp32 weights, gradients, AdamW state and activations"
      << (bf16 ? ", and the weights' bf16 copy that the products read" : "")
      << (zero1 ? "; ZeRO-1: AdamW m+v of 1/dp of the parameters" : "")
      << (deck.checkpoint.async ? "; checkpoint.async: the host copy a background save writes from" : "")
      << "; activations = in flight x stash per micro-batch"
      << (planned_schedule_splits_backward(deck) ? " + the output gradients kept from I until W" : "")
      << recomputed_memory_note(deck.schedule.recompute, deck.model.attention)
      << attention_memory_note(deck.model.attention)
      << (deck.parallel.sequence_parallel ? "; sequence parallel: the residual stream's tensors hold 1/tp of the rows"
                                          : "")
      << ")\n";
  std::vector<std::string> header{interleaved ? "rank" : "stage", "weights"};
  if (bf16) header.push_back("bf16 copy");
  header.insert(header.end(), {"grads", "AdamW m+v"});
  if (zero1) header.push_back("ZeRO-1 shard");
  if (deck.checkpoint.async) header.push_back("save copy");
  header.insert(header.end(), {"act/micro-batch", "in flight", "activations", "workspace", "total"});
  TextTable table(header);
  for (int rank = 0; rank < deck.parallel.pp; ++rank) {
    const RankMemory memory = rank_memory(deck, stages, rank);
    std::vector<std::string> row{str(rank), human_bytes(memory.weight_bytes)};
    if (bf16) row.push_back(human_bytes(memory.weight_copy_bytes));
    row.insert(row.end(), {human_bytes(memory.grad_bytes), human_bytes(memory.optimizer_bytes)});
    if (zero1) row.push_back(human_bytes(memory.zero1_bytes));
    if (deck.checkpoint.async) row.push_back(human_bytes(memory.checkpoint_copy_bytes));
    row.insert(row.end(), {human_bytes(memory.activation_bytes_per_microbatch),
                           count_text(memory.in_flight_microbatches), human_bytes(memory.activation_bytes()),
                           human_bytes(memory.workspace_bytes), human_bytes(memory.total_bytes())});
    table.add_row(row);
  }
  table.print(out);
  if (interleaved) out << "  in flight: micro-batches of a whole rank (chunks in flight / chunks per rank)\n";
  if (zero1)
    out << "  ZeRO-1 shard: the reduced gradients of this rank's pieces, and staging copies of a padded bucket\n";
  out << "  workspace: backward's activation-gradient buffers; not counted: the runtime (libraries, MPI and\n"
         "  BLAS buffers, token data), 90-210 MiB per rank measured on a 2-core CPU node\n";
}

std::string tally_text(const PlannedCollectives& tally) {
  return tally.count == 0 ? "-" : str(tally.count) + " x, " + human_bytes(tally.bytes);
}

void print_parallel_choices(std::ostream& out, const Deck& deck, const std::vector<StageLayers>& stages);

// What each collective moves per step, and what the other sequence-parallel and recompute
// choices would hold and move (the largest of the ranks).
void print_tp_traffic(std::ostream& out, const Deck& deck, const std::vector<StageLayers>& stages) {
  if (deck.parallel.tp == 1) return;
  const bool interleaved = static_cast<int>(stages.size()) > deck.parallel.pp;
  out << "\nTensor-parallel communication per step (each TP rank of a stage; sequence parallel "
      << (deck.parallel.sequence_parallel ? "on" : "off") << ")\n";
  TextTable table({interleaved ? "rank" : "stage", "all-reduce", "all-gather", "reduce-scatter", "ring sends"});
  // Consecutive ranks that move the same (the middle stages, mostly) share one row: "1-14".
  std::vector<std::string> cells, previous;
  int first_alike = 0;
  for (int rank = 0; rank <= deck.parallel.pp; ++rank) {
    cells.clear();
    if (rank < deck.parallel.pp) {
      const TpTraffic traffic = tp_traffic_per_step(deck, stages, rank);
      cells = {tally_text(traffic.all_reduce), tally_text(traffic.all_gather), tally_text(traffic.reduce_scatter),
               human_bytes(static_cast<std::int64_t>(traffic.wire_bytes()))};
    }
    if (rank > 0 && cells != previous) {
      std::vector<std::string> row{first_alike == rank - 1 ? str(rank - 1) : str(first_alike) + "-" + str(rank - 1)};
      row.insert(row.end(), previous.begin(), previous.end());
      table.add_row(row);
      first_alike = rank;
    }
    previous = cells;
  }
  table.print(out);
  out << "  count x buffer bytes, as the timeline's ALLREDUCE_TP, ALLGATHER_TP and REDUCE_SCATTER_TP events\n"
      << "  record them; ring sends: 2(tp-1)/tp of an all-reduce's buffer, (tp-1)/tp of the others'\n";
  print_parallel_choices(out, deck, stages);
}

// One row per pipeline rank of what it sends in a step: `traffic(rank)` gives the messages' count
// and bytes.
template <class Traffic>
void print_sends_per_stage(std::ostream& out, const std::string& count_header, int pp, Traffic&& traffic) {
  TextTable table({"stage", count_header, "bytes sent"});
  for (int rank = 0; rank < pp; ++rank) {
    const auto [count, bytes] = traffic(rank);
    table.add_row({str(rank), str(count), human_bytes(bytes)});
  }
  table.print(out);
}

// The CP ring's messages per step, per pipeline rank (plan/cp_traffic.hpp).
void print_cp_traffic(std::ostream& out, const Deck& deck, const std::vector<StageLayers>& stages) {
  if (deck.parallel.cp == 1) return;
  out << "\nContext-parallel ring per step (each CP rank of a stage; cp " << deck.parallel.cp << ", "
      << deck.model.seq_len / deck.parallel.cp << " positions per rank and sequence)\n";
  print_sends_per_stage(out, "hops sent", deck.parallel.pp, [&](int rank) {
    const CpTraffic traffic = cp_traffic_per_step(deck, stages, rank);
    return std::pair{traffic.hops, traffic.bytes};
  });
  out << "  per layer and micro-batch: forward cp-1 hops of the k | v chunks in hand, backward cp-1 more and cp\n"
      << "  of their gradients; the timeline's RING_CP events record the same bytes\n";
}

// The mixture's all-to-alls per step, per pipeline rank (plan/ep_traffic.hpp).
void print_ep_traffic(std::ostream& out, const Deck& deck, const std::vector<StageLayers>& stages) {
  if (deck.parallel.ep == 1) return;
  out << "\nExpert-parallel all-to-all per step (each rank of a stage; ep " << deck.parallel.ep << ", "
      << deck.model.moe.experts / deck.parallel.ep << " experts per rank, balanced routing)\n";
  print_sends_per_stage(out, "all-to-alls", deck.parallel.pp, [&](int rank) {
    const EpTraffic traffic = ep_traffic_per_step(deck, stages, rank);
    return std::pair{traffic.exchanges, traffic.bytes};
  });
  out << "  per mixture layer and micro-batch: forward the rows' counts per expert, the rows out and back;\n"
      << "  backward their gradients both ways; the timeline's ALLTOALL_EP events record the bytes as routed\n";
}

// Activation memory and TP traffic of every sequence-parallel and recompute choice.
void print_parallel_choices(std::ostream& out, const Deck& deck, const std::vector<StageLayers>& stages) {
  out << "\nSequence parallelism x recomputation (the largest rank)\n";
  TextTable choices({"sequence_parallel", "recompute", "activations", "ring sends/step"});
  for (const bool sequence_parallel : {false, true}) {
    if (sequence_parallel && deck.model.moe.experts > 0) continue;  // refused with [model.moe]
    for (const Recompute recompute : {Recompute::none, Recompute::selective, Recompute::full}) {
      Deck variant = deck;
      variant.parallel.sequence_parallel = sequence_parallel;
      variant.schedule.recompute = recompute;
      std::int64_t activations = 0;
      double sends = 0.0;
      for (int rank = 0; rank < deck.parallel.pp; ++rank) {
        activations = std::max(activations, rank_memory(variant, stages, rank).activation_bytes());
        sends = std::max(sends, tp_traffic_per_step(variant, stages, rank).wire_bytes());
      }
      const bool chosen = sequence_parallel == deck.parallel.sequence_parallel && recompute == deck.schedule.recompute;
      choices.add_row({std::string(chosen ? "* " : "  ") + (sequence_parallel ? "true" : "false"), word_of(recompute),
                       human_bytes(activations), human_bytes(static_cast<std::int64_t>(sends))});
    }
  }
  choices.print(out);
  out << "  * the deck's; sequence parallelism needs seq_len % tp == 0\n";
}

// Groups along one axis are arithmetic progressions of ranks, written as {first..last step s}.
std::string group_text(const std::vector<int>& group) {
  // Appended piece by piece: GCC 12 misreports "literal" + std::string&& as overlapping (-Wrestrict).
  std::string text = "{";
  text += str(group.front());
  if (group.size() > 1) {
    const int step = group[1] - group[0];
    text += "..";
    text += str(group.back());
    if (step != 1) {
      text += " step ";
      text += str(step);
    }
  }
  return text + "}";
}

void print_groups(std::ostream& out, Axis axis, const ParallelConfig& grid) {
  const std::vector<std::vector<int>> groups = axis_groups(axis, grid);
  std::string text;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const bool elided = groups.size() > kGroupsShown + 1 && g >= kGroupsShown && g + 1 < groups.size();
    if (elided) {
      if (g == kGroupsShown) text += ", ...";
      continue;
    }
    text += (g == 0 ? "" : ", ") + group_text(groups[g]);
  }
  out << "  " << word_of(axis) << " groups (" << groups.size() << " of " << axis_size(axis, grid) << " ranks): " << text
      << '\n';
}

void print_rank_layout(std::ostream& out, const ParallelConfig& grid, const std::vector<StageLayers>& stages,
                       ChunkPlacement placement) {
  const int ranks = grid.world_size();
  out << "\nRank layout (order " << word_of(grid.order) << ": " << word_of(grid.order[0]) << " varies fastest)\n";
  const bool cp = grid.cp > 1;  // a column only where it varies
  std::vector<std::string> header = {"rank", "tp", "pp", "dp", "stage layers"};
  if (cp) header.insert(header.begin() + 2, "cp");
  TextTable table(header);
  const auto add_rank = [&](int rank) {
    const GridCoords c = rank_to_coords(rank, grid);
    std::vector<std::string> row = {str(rank), str(c.tp), str(c.pp), str(c.dp),
                                    rank_layer_ranges(stages, grid.pp, placement, c.pp)};
    if (cp) row.insert(row.begin() + 2, str(c.cp));
    table.add_row(row);
  };
  if (ranks <= kFullRankTableLimit) {
    for (int rank = 0; rank < ranks; ++rank) add_rank(rank);
  } else {
    for (int rank = 0; rank < kRankRowsAtEachEnd; ++rank) add_rank(rank);
    table.add_row(std::vector<std::string>(header.size(), "..."));
    for (int rank = ranks - kRankRowsAtEachEnd; rank < ranks; ++rank) add_rank(rank);
  }
  table.print(out);
  for (Axis axis : {Axis::tp, Axis::cp, Axis::pp, Axis::dp})
    if (axis != Axis::cp || cp) print_groups(out, axis, grid);
}

}  // namespace

void print_plan(std::ostream& out, const Deck& requested, int ranks, const std::vector<std::string>& extra_notes) {
  std::vector<std::string> notes;
  const Deck deck = deck_for_world_size(requested, ranks, notes);
  notes.insert(notes.end(), extra_notes.begin(), extra_notes.end());
  const ParallelConfig& grid = deck.parallel;
  const std::vector<StageLayers> stages = partition_layers(deck.model, grid, planned_chunks(deck.schedule));

  // Composed first and written whole, so a deck error found mid-way leaves no half-printed plan.
  std::ostringstream plan;
  plan << "trident plan: " << (deck.path.empty() ? "(deck)" : deck.path) << '\n';
  plan << "  grid: " << grid.world_size() << " ranks = " << describe_grid(grid) << '\n';
  for (const std::string& note : notes) plan << "  note: " << note << '\n';
  print_model(plan, deck.model, grid.tp);
  print_parameters(plan, deck, stages);
  print_step(plan, deck);
  print_schedule(plan, deck);
  print_memory(plan, deck, stages);
  print_tp_traffic(plan, deck, stages);
  print_cp_traffic(plan, deck, stages);
  print_ep_traffic(plan, deck, stages);
  print_rank_layout(plan, grid, stages, chunk_placement(deck.schedule));
  out << plan.str();
}

}  // namespace trident
