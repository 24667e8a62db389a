#include "plan/schedule_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "plan/memory.hpp"
#include "plan/partition.hpp"
#include "plan/pipeline_theory.hpp"
#include "plan/text_table.hpp"
#include "plan/units.hpp"

namespace trident {
namespace {

std::string str(int value) { return std::to_string(value); }

std::string fixed(double value, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// Whole numbers as such ("4"), fractions with two decimals ("2.50").
std::string count_text(double value) {
  return value == static_cast<double>(static_cast<long>(value)) ? std::to_string(static_cast<long>(value))
                                                                 : fixed(value, 2);
}

// "3.3", "4656.8", "282,636": one decimal while it matters, thousands separated when large.
std::string mib_text(double mib) {
  return mib < 10000.0 ? fixed(mib, 1) : with_thousands(std::llround(mib));
}

// The deck as it would run with `kind` and `chunks`: what partition and memory formulas read. An
// explicit stage_layers list made for another chunk count gives way to the uniform split.
Deck with_schedule(const Deck& deck, ScheduleKind kind, int chunks) {
  Deck changed = deck;
  changed.schedule.kind = kind;
  changed.schedule.virtual_stages = chunks;
  const std::size_t pieces = static_cast<std::size_t>(deck.parallel.pp) * chunks;
  if (!changed.parallel.stage_layers.empty() && changed.parallel.stage_layers.size() != pieces) {
    changed.parallel.stage_layers.clear();
  }
  return changed;
}

// One line of the comparison table: a schedule that can run the deck's p and m.
struct Candidate {
  std::string label;  // "1f1b", or "auto: zb-h1"
  bool is_decks = false;
  Schedule schedule;
};

// rank 0's activation memory in MiB when it holds `peak_chunks` chunks of micro-batches at once
// (a schedule that splits B: its action list walked, RankMemory::walked_peak_bytes).
double rank0_activation_mib(const Deck& deck, const Schedule& schedule, int peak_chunks) {
  const Deck planned = with_schedule(deck, schedule.kind, schedule.chunks);
  const auto stages = partition_layers(planned.model, planned.parallel, schedule.chunks);
  const RankMemory memory = rank_memory(planned, stages, 0);
  const double bytes = memory.walked_peak_bytes > 0
                           ? static_cast<double>(memory.activation_bytes())
                           : static_cast<double>(memory.activation_bytes_per_microbatch) * peak_chunks / schedule.chunks +
                                 static_cast<double>(memory.recompute_bytes);
  return bytes / (1024.0 * 1024.0);
}

std::string theory_text(const Schedule& schedule) {
  if (schedule.kind == ScheduleKind::file) return "-";
  switch (schedule_type(schedule.kind).bubble) {
    case BubbleTheory::textbook:
      return percent(theoretical_bubble(schedule.stages, schedule.microbatches));
    case BubbleTheory::interleaved:
      return percent(theoretical_bubble(schedule.stages, schedule.microbatches, schedule.chunks));
    case BubbleTheory::below_textbook:
      break;
  }
  return "-";  // zero-bubble kinds: no closed form worth quoting; the simulation is the number
}

std::vector<std::string> table_row(const Deck& deck, const Candidate& candidate) {
  const Schedule& schedule = candidate.schedule;
  const int v = schedule.chunks;
  const SimulatedStep costed = simulate(schedule, deck_action_costs(deck, v));
  const SimulatedStep equal = simulate(schedule, ActionCosts::uniform(schedule.virtual_stages(), v));
  const int first_peak = costed.peak_in_flight.front();
  const int last_peak = costed.peak_in_flight.back();
  return {candidate.is_decks ? "*" : "",
          candidate.label,
          str(v),
          percent(costed.bubble),
          percent(equal.bubble),
          theory_text(schedule),
          count_text(static_cast<double>(first_peak) / v) + " / " + count_text(static_cast<double>(last_peak) / v),
          mib_text(rank0_activation_mib(deck, schedule, first_peak))};
}

// What the simulated times are, for the notes under the table and the diagram's title.
std::string costs_text(const Deck& deck) {
  if (deck.emulate.enabled) {
    const EmulateConfig& e = deck.emulate;
    return "[emulate] sleeps: F " + count_text(e.forward_ms) + " ms, B " + count_text(e.backward_ms) + " ms, I " +
           count_text(e.input_grad_ms) + " ms, W " + count_text(e.weight_grad_ms) + " ms";
  }
  return "F = forward FLOPs of each virtual stage, B = 2F, I = W = F";
}

}  // namespace

Schedule deck_schedule(const Deck& deck) {
  const ScheduleConfig& schedule = deck.schedule;
  const int p = deck.parallel.pp;
  if (schedule.kind == ScheduleKind::file) {
    if (!schedule.from_file) throw std::logic_error("deck_schedule: schedule.file was not read with the deck");
    return *schedule.from_file;
  }
  try {
    if (schedule.kind == ScheduleKind::automatic) {
      return choose_auto_schedule(p, schedule.microbatches, schedule.virtual_stages, schedule.auto_memory_limit);
    }
    return make_schedule(schedule.kind, p, schedule.microbatches, schedule.virtual_stages, schedule.activation_budget);
  } catch (const InputError& error) {
    throw InputError(
        (deck.path.empty() ? std::string("(deck)") : deck.path) + ": schedule.kind = \"" + word_of(schedule.kind) +
        "\" with parallel.pp = " + str(p) + ", schedule.microbatches = " + str(schedule.microbatches) +
        ", schedule.virtual_stages = " + str(schedule.virtual_stages) + " has no schedule: " + error.what());
  }
}

ActionCosts deck_action_costs(const Deck& deck, int chunks) {
  const int virtual_stages = deck.parallel.pp * chunks;
  ActionCosts costs;
  if (deck.emulate.enabled) {
    const EmulateConfig& e = deck.emulate;
    costs.per_virtual_stage.assign(virtual_stages, {e.forward_ms, e.backward_ms, e.input_grad_ms, e.weight_grad_ms});
    return costs;
  }
  const Deck planned = with_schedule(deck, deck.schedule.kind, chunks);
  const auto stages = partition_layers(planned.model, planned.parallel, chunks);
  std::vector<double> flops;
  for (int s = 0; s < virtual_stages; ++s) {
    flops.push_back(stage_forward_flops_per_token(deck.model, stages[s], s == 0, s == virtual_stages - 1));
  }
  // In units of the cheapest forward, so that diagrams get whole cells and round time labels.
  const double unit = *std::min_element(flops.begin(), flops.end());
  for (const double f : flops) costs.per_virtual_stage.push_back({f / unit, 2.0 * f / unit, f / unit, f / unit});
  return costs;
}

void print_schedule_table(std::ostream& out, const Deck& deck) {
  const ScheduleConfig& config = deck.schedule;
  const int p = deck.parallel.pp;
  const int m = config.microbatches;
  const int layers = deck.model.layers;
  // Interleaving is shown with the deck's chunk count, or 2 when the deck has one chunk.
  const int interleaved_chunks = std::max(2, config.virtual_stages);
  const bool interleaving_fits = static_cast<long>(p) * interleaved_chunks <= layers;

  std::vector<Candidate> candidates;
  std::vector<std::string> skipped;
  for (const ScheduleType& type : schedule_types()) {
    const std::string word(type.word);
    const int chunks = type.chunks == ChunkRule::one          ? 1
                       : type.chunks == ChunkRule::two_in_a_v ? 2
                                                              : interleaved_chunks;
    if (static_cast<long>(p) * chunks > layers) {
      skipped.push_back(word + " (v = " + str(chunks) + "): needs pp x v = " + str(p * chunks) +
                        " <= model.layers = " + str(layers));
      continue;
    }
    try {
      Schedule schedule = make_schedule(type.kind, p, m, chunks, config.activation_budget);
      candidates.push_back({word, config.kind == type.kind, std::move(schedule)});
    } catch (const InputError& error) {
      skipped.push_back(word + ": " + error.what());
    }
  }
  if (config.kind == ScheduleKind::file) candidates.push_back({"file", true, deck_schedule(deck)});
  try {
    // The deck's own auto may use up to virtual_stages chunks; otherwise show what auto would pick
    // with the chunks of the interleaved line.
    const bool automatic = config.kind == ScheduleKind::automatic;
    const int max_chunks = automatic ? config.virtual_stages : (interleaving_fits ? interleaved_chunks : 1);
    Schedule chosen = choose_auto_schedule(p, m, max_chunks, config.auto_memory_limit);
    candidates.push_back({"auto: " + word_of(chosen.kind), automatic, std::move(chosen)});
  } catch (const InputError& error) {
    skipped.push_back("auto: " + std::string(error.what()));
  }

  out << "\nSchedules for p = " << p << ", m = " << m << " (simulated step; * = the deck's schedule.kind)\n";
  TextTable table({"", "kind", "v", "bubble", "equal stages", "theory", "in flight r0 / last", "act. rank 0 MiB"}, 2);
  for (const Candidate& candidate : candidates) table.add_row(table_row(deck, candidate));
  table.print(out);
  out << "  bubble        idle fraction 1 - busy / (p x step time) of the simulated step, with\n"
      << "                " << costs_text(deck) << "; messages free\n"
      << "  equal stages  the same with every virtual stage alike (F = 1/v, B = 2/v, I = W = 1/v)\n"
      << "  theory        (p-1)/(m+p-1) for gpipe and 1f1b, (p-1)/(v*m+p-1) for interleaved-1f1b\n"
      << "  in flight     the most micro-batches (chunks / v) whose activations a rank holds at once\n"
      << "  act. rank 0   its activation stash per micro-batch (plan memory formula) x its in flight\n"
      << "                + the output gradients that I keeps for W, at their peak"
      << (config.recompute == Recompute::full ? "\n                + one chunk recomputed for its backward"
          : config.recompute == Recompute::selective ? "\n                + one layer's attention probabilities, recomputed"
                                                     : "")
      << '\n';
  if (config.kind == ScheduleKind::automatic)
    out << "  auto          " << explain_auto_choice(p, m, config.virtual_stages, config.auto_memory_limit) << '\n';
  for (const std::string& reason : skipped) out << "  not possible here: " << reason << '\n';
}

void print_schedule_diagram(std::ostream& out, const Deck& deck, int width) {
  const Schedule schedule = deck_schedule(deck);
  const SimulatedStep timing = simulate(schedule, deck_action_costs(deck, schedule.chunks));
  out << "\nSchedule diagram: " << (deck.schedule.kind == ScheduleKind::automatic ? "auto chose " : "")
      << word_of(schedule.kind) << " (" << costs_text(deck) << ")\n"
      << render_schedule(schedule, timing, width);
}

}  // namespace trident
