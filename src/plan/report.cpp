#include "plan/report.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "plan/layout.hpp"
#include "plan/memory.hpp"
#include "plan/model_size.hpp"
#include "plan/partition.hpp"
#include "plan/pipeline_theory.hpp"
#include "plan/text_table.hpp"
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

// The deck's grid, with dp derived from `ranks` when the user asked for another world size.
Deck deck_for_world_size(const Deck& deck, int ranks, std::vector<std::string>& notes) {
  const ParallelConfig& grid = deck.parallel;
  if (ranks == grid.world_size()) return deck;
  const int tp_pp = grid.tp * grid.pp;
  if (ranks < 1 || ranks % tp_pp != 0) {
    throw InputError("--ranks " + str(ranks) + " does not fit the grid of " + deck.path +
                     ": the rank count must be a multiple of parallel.tp x parallel.pp = " +
                     str(grid.tp) + " x " + str(grid.pp) + " = " + str(tp_pp) + " (dp = ranks / " +
                     str(tp_pp) + "); valid --ranks are " + str(tp_pp) + ", " + str(2 * tp_pp) +
                     ", " + str(3 * tp_pp) + ", ... (the deck itself gives " +
                     str(grid.world_size()) + "), or change parallel.tp / parallel.pp");
  }
  Deck derived = deck;
  derived.parallel.dp = ranks / tp_pp;
  notes.push_back("--ranks " + str(ranks) + " differs from the deck's tp x pp x dp = " +
                  str(grid.world_size()) + ": planning with dp = " + str(ranks) + " / (tp " +
                  str(grid.tp) + " x pp " + str(grid.pp) + ") = " + str(derived.parallel.dp));
  return derived;
}

void print_model(std::ostream& out, const ModelConfig& model, int tp) {
  const std::int64_t padded = padded_vocab(model.vocab, tp);
  const std::string vocab = padded == model.vocab
                                ? str(model.vocab)
                                : str(model.vocab) + " (padded to " + str(padded) +
                                      " for the vocab-parallel split across tp " + str(tp) + ")";
  out << "\nModel (GPT-2)\n";
  print_fields(out, {{"layers L", str(model.layers)},
                     {"d_model C", str(model.d_model)},
                     {"heads H", str(model.heads) + " (head_dim " + str(model.head_dim()) + ")"},
                     {"seq_len T", str(model.seq_len)},
                     {"vocab V", vocab},
                     {"tie_embeddings", model.tie_embeddings ? "true" : "false"}});
}

std::string stage_contents(const ModelConfig& model, const StageLayers& stage, bool first,
                           bool last) {
  std::string text = first ? "wte, wpe, " : "";
  text += stage.num_layers == 1 ? "h." + str(stage.first_layer)
                                : "h." + str(stage.first_layer) + "-h." + str(stage.end_layer() - 1);
  if (last) {
    text += ", ln_f";
    if (!model.tie_embeddings) {
      text += ", lm_head";
    } else if (!first) {
      text += ", head (wte copy)";
    }
  }
  return text;
}

void print_parameters(std::ostream& out, const Deck& deck, const std::vector<StageLayers>& stages) {
  const ModelConfig& model = deck.model;
  const int tp = deck.parallel.tp;
  out << "\nParameters\n";
  print_fields(out, {{"total", exact_and_human(total_params(model)) +
                                   (model.tie_embeddings ? ", tied head counted once" : "")},
                     {"non-embedding", exact_and_human(non_embedding_params(model)) + ", blocks + ln_f"}});

  out << "\nStages (" << (deck.parallel.stage_layers.empty()
                              ? "uniform split: the first L mod p stages get one extra layer"
                              : "explicit parallel.stage_layers")
      << ")\n";
  TextTable table({"stage", "layers", "holds", "params", "per TP rank (tp " + str(tp) + ")"}, 3);
  const int last = static_cast<int>(stages.size()) - 1;
  for (int s = 0; s <= last; ++s) {
    const bool first_stage = s == 0;
    const bool last_stage = s == last;
    table.add_row({str(s), layer_range(stages[s]),
                   stage_contents(model, stages[s], first_stage, last_stage),
                   exact_and_human(stage_params(model, stages[s], first_stage, last_stage).total()),
                   exact_and_human(stage_params(model, stages[s], first_stage, last_stage, tp).total())});
  }
  table.print(out);
  if (model.tie_embeddings && last > 0) {
    out << "  The tied head stores a second copy of wte on stage " << last
        << "; its gradient is summed\n  with stage 0's before the optimizer step.\n";
  }
  if (tp > 1) {
    out << "  Per TP rank: c_attn and c_fc split by columns, both c_proj by rows (bias replicated),\n"
           "  wte split by vocabulary rows, wpe and LayerNorms replicated.\n";
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
  const int p = deck.parallel.pp;
  const int m = deck.schedule.microbatches;
  out << "\nSchedule\n";
  print_fields(out, {{"kind", deck.schedule.kind},
                     {"stages p", str(p)},
                     {"micro-batches m", str(m) + " (micro_batch_size " +
                                             str(deck.schedule.micro_batch_size) + ")"},
                     {"virtual stages", str(deck.schedule.virtual_stages)},
                     {"bubble (theory)", percent(theoretical_bubble(p, m)) + " = (p-1)/(m+p-1) = " +
                                             str(p - 1) + "/" + str(m + p - 1) +
                                             " (gpipe/1f1b formula)"}});
}

void print_memory(std::ostream& out, const Deck& deck, const std::vector<StageLayers>& stages) {
  out << "\nMemory per rank (fp32, no ZeRO; activations = in flight x stash per micro-batch)\n";
  TextTable table({"stage", "weights", "grads", "AdamW m+v", "act/micro-batch", "in flight",
                   "activations", "total"});
  for (int s = 0; s < static_cast<int>(stages.size()); ++s) {
    const RankMemory memory = rank_memory(deck, stages, s);
    table.add_row({str(s), human_bytes(memory.weight_bytes), human_bytes(memory.grad_bytes),
                   human_bytes(memory.optimizer_bytes),
                   human_bytes(memory.activation_bytes_per_microbatch),
                   str(memory.in_flight_microbatches), human_bytes(memory.activation_bytes()),
                   human_bytes(memory.total_bytes())});
  }
  table.print(out);
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
  out << "  " << axis_name(axis) << " groups (" << groups.size() << " of " << axis_size(axis, grid)
      << " ranks): " << text << '\n';
}

void print_rank_layout(std::ostream& out, const ParallelConfig& grid,
                       const std::vector<StageLayers>& stages) {
  const int ranks = grid.world_size();
  out << "\nRank layout (order " << grid.order << ": " << axis_name(parse_axis_order(grid.order)[0])
      << " varies fastest)\n";
  TextTable table({"rank", "tp", "pp", "dp", "stage layers"});
  const auto add_rank = [&](int rank) {
    const GridCoords c = rank_to_coords(rank, grid);
    table.add_row({str(rank), str(c.tp), str(c.pp), str(c.dp), layer_range(stages[c.pp])});
  };
  if (ranks <= kFullRankTableLimit) {
    for (int rank = 0; rank < ranks; ++rank) add_rank(rank);
  } else {
    for (int rank = 0; rank < kRankRowsAtEachEnd; ++rank) add_rank(rank);
    table.add_row({"...", "...", "...", "...", "..."});
    for (int rank = ranks - kRankRowsAtEachEnd; rank < ranks; ++rank) add_rank(rank);
  }
  table.print(out);
  for (Axis axis : {Axis::tp, Axis::pp, Axis::dp}) print_groups(out, axis, grid);
}

}  // namespace

void print_plan(std::ostream& out, const Deck& requested, int ranks) {
  std::vector<std::string> notes;
  const Deck deck = deck_for_world_size(requested, ranks, notes);
  const ParallelConfig& grid = deck.parallel;
  const std::vector<StageLayers> stages = partition_layers(deck.model, grid);

  // Composed first and written whole, so a deck error found mid-way leaves no half-printed plan.
  std::ostringstream plan;
  plan << "trident plan: " << (deck.path.empty() ? "(deck)" : deck.path) << '\n';
  plan << "  grid: " << grid.world_size() << " ranks = tp " << grid.tp << " x pp " << grid.pp
       << " x dp " << grid.dp << '\n';
  for (const std::string& note : notes) plan << "  note: " << note << '\n';
  print_model(plan, deck.model, grid.tp);
  print_parameters(plan, deck, stages);
  print_step(plan, deck);
  print_schedule(plan, deck);
  print_memory(plan, deck, stages);
  print_rank_layout(plan, grid, stages);
  out << plan.str();
}

}  // namespace trident
