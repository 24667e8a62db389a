#include "predict/report.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "plan/layout.hpp"
#include "plan/units.hpp"

namespace trident {
namespace {

std::string seconds_text(double seconds) {
  char text[32];
  if (seconds == 0.0) return "0 s";
  if (seconds >= 1.0)
    std::snprintf(text, sizeof text, "%.3g s", seconds);
  else if (seconds >= 1e-3)
    std::snprintf(text, sizeof text, "%.3g ms", seconds * 1e3);
  else
    std::snprintf(text, sizeof text, "%.3g us", seconds * 1e6);
  return text;
}

std::string share_text(double part, double whole) { return seconds_text(part) + " (" + percent(part / whole) + ")"; }

std::string actions_text(const ActionCosts::Stage& stage) {
  return "F " + seconds_text(stage.forward) + ", B " + seconds_text(stage.backward) + " (I " +
         seconds_text(stage.input_grad) + ", W " + seconds_text(stage.weight_grad) + ")";
}

}  // namespace

void print_prediction(std::ostream& out, const Deck& deck, const Machine& machine, const StepPrediction& p) {
  const int devices = deck.parallel.world_size();
  const double peak = machine.peak_flops(deck.train.precision);
  out << "\nPredicted step on " << machine.name << " (" << machine.path << "): " << devices
      << (devices == 1 ? " device, " : " devices, ") << machine.devices_per_node << " per node, "
      << human_bytes(machine.device_memory_bytes) << " each, " << human_flops(peak)
      << "/s peak at train.precision = " << word_of(deck.train.precision) << "\n";
  out << "  step      " << seconds_text(p.step_time_s) << ": pipeline " << share_text(p.pipeline_s, p.step_time_s)
      << " with a " << percent(p.bubble) << " bubble, embedding sync " << share_text(p.embedding_sync_s, p.step_time_s)
      << ", exposed DP reduction " << share_text(p.dp_exposed_s, p.step_time_s) << ", optimizer "
      << share_text(p.optimizer_s, p.step_time_s) << "\n";
  out << "            TP collectives inside the busiest rank's actions: " << share_text(p.tp_comm_s, p.step_time_s);
  if (deck.parallel.cp > 1) out << "; CP ring hops not hidden by attention: " << share_text(p.cp_comm_s, p.step_time_s);
  if (deck.parallel.ep > 1) out << "; EP all-to-alls: " << share_text(p.ep_comm_s, p.step_time_s);
  out << "\n";
  out << "  speed     " << human_count(p.tokens_per_s) << " tokens/s, " << human_flops(p.flops_per_device)
      << "/s per device (model FLOPs " << human_flops(p.flops_per_step) << " per step), MFU " << percent(p.mfu) << "\n";
  out << "  actions   one micro-batch, first virtual stage: " << actions_text(p.costs.per_virtual_stage.front());
  if (p.costs.per_virtual_stage.size() > 1)
    out << "; last: " << actions_text(p.costs.per_virtual_stage.back()) << "; a message "
        << seconds_text(p.costs.p2p_latency);
  out << "\n  memory    per pipeline rank:";
  for (const std::int64_t bytes : p.memory_per_rank_bytes) out << " " << human_bytes(static_cast<double>(bytes));
  const auto largest = *std::max_element(p.memory_per_rank_bytes.begin(), p.memory_per_rank_bytes.end());
  out << " (" << (p.fits ? "fits in " : "does NOT fit in ") << human_bytes(machine.device_memory_bytes)
      << (p.fits ? "" : ": largest " + human_bytes(static_cast<double>(largest))) << ")\n";
}

namespace {

toml::table prediction_table(const Deck& deck, const Machine& machine, const StepPrediction& p) {
  toml::array memory;
  for (const std::int64_t bytes : p.memory_per_rank_bytes) memory.push_back(bytes);
  return toml::table{
      {"machine", machine.name},
      {"machine_file", machine.path},
      {"deck", deck.path},
      {"devices", deck.parallel.world_size()},
      {"tp", deck.parallel.tp},
      {"cp", deck.parallel.cp},
      {"ep", deck.parallel.ep},
      {"pp", deck.parallel.pp},
      {"dp", deck.parallel.dp},
      {"schedule", word_of(p.schedule.kind)},
      {"virtual_stages", p.schedule.chunks},
      {"microbatches", deck.schedule.microbatches},
      {"micro_batch_size", deck.schedule.micro_batch_size},
      {"recompute", word_of(deck.schedule.recompute)},
      {"step_time_s", p.step_time_s},
      {"tokens_per_s", p.tokens_per_s},
      {"tflops_per_device", p.flops_per_device / 1e12},
      {"mfu", p.mfu},
      {"bubble", p.bubble},
      {"pipeline_s", p.pipeline_s},
      {"tp_comm_s", p.tp_comm_s},
      {"cp_comm_s", p.cp_comm_s},
      {"ep_comm_s", p.ep_comm_s},
      {"embedding_sync_s", p.embedding_sync_s},
      {"dp_exposed_s", p.dp_exposed_s},
      {"optimizer_s", p.optimizer_s},
      {"memory_per_rank_bytes", memory},
      {"device_memory_bytes", static_cast<std::int64_t>(machine.device_memory_bytes)},
      {"fits", p.fits},
  };
}

std::string grid_text(const Deck& deck, const StepPrediction& p) {
  return describe_grid(deck.parallel) + ", " + std::to_string(deck.schedule.microbatches) + " x " +
         std::to_string(deck.schedule.micro_batch_size) + " sequences, " + word_of(p.schedule.kind) +
         (p.schedule.chunks > 1 ? " v " + std::to_string(p.schedule.chunks) : "") + ", recompute " +
         word_of(deck.schedule.recompute);
}

}  // namespace

void print_prediction_json(std::ostream& out, const Deck& deck, const Machine& machine, const StepPrediction& p) {
  out << toml::json_formatter{prediction_table(deck, machine, p)} << "\n";
}

namespace {

struct StepPart {
  const char* name;
  double seconds;
};

std::vector<StepPart> step_parts(const StepPrediction& p) {
  return {{"computing", p.pipeline_s * (1.0 - p.bubble)},
          {"bubble", p.pipeline_s * p.bubble},
          {"DP", p.dp_exposed_s},
          {"optimizer", p.optimizer_s},
          {"embedding sync", p.embedding_sync_s}};
}

// The parts of the step that moved against the deck's, largest change first; changes under 0.5%
// of the deck's step are left out.
std::string part_changes(const StepPrediction& candidate, const StepPrediction& deck) {
  std::vector<StepPart> changes;
  const std::vector<StepPart> ours = step_parts(candidate), theirs = step_parts(deck);
  for (std::size_t i = 0; i < ours.size(); ++i)
    if (std::abs(ours[i].seconds - theirs[i].seconds) >= 0.005 * deck.step_time_s)
      changes.push_back({ours[i].name, ours[i].seconds - theirs[i].seconds});
  std::ranges::sort(changes, std::greater{}, [](const StepPart& part) { return std::abs(part.seconds); });
  std::string text;
  for (const StepPart& part : changes)
    text += std::string(text.empty() ? "" : ", ") + part.name + " " + (part.seconds < 0 ? "-" : "+") +
            seconds_text(std::abs(part.seconds));
  return text.empty() ? "no part changes by 0.5%" : text;
}

// The choices that differ from the deck's: "tp 8 -> 4, recompute full -> none".
std::string choice_changes(const GridCandidate& candidate, const GridCandidate& deck) {
  const auto schedule = [](const GridCandidate& c) {
    const Schedule& s = c.prediction.schedule;
    return std::string(word_of(s.kind)) + (s.chunks > 1 ? " v " + std::to_string(s.chunks) : "");
  };
  const std::pair<const char*, std::pair<std::string, std::string>> choices[] = {
      {"tp", {std::to_string(candidate.deck.parallel.tp), std::to_string(deck.deck.parallel.tp)}},
      {"cp", {std::to_string(candidate.deck.parallel.cp), std::to_string(deck.deck.parallel.cp)}},
      {"pp", {std::to_string(candidate.deck.parallel.pp), std::to_string(deck.deck.parallel.pp)}},
      {"dp", {std::to_string(candidate.deck.parallel.dp), std::to_string(deck.deck.parallel.dp)}},
      {"ep", {std::to_string(candidate.deck.parallel.ep), std::to_string(deck.deck.parallel.ep)}},
      {"micro-batch",
       {std::to_string(candidate.deck.schedule.micro_batch_size), std::to_string(deck.deck.schedule.micro_batch_size)}},
      {"schedule", {schedule(candidate), schedule(deck)}},
      {"recompute", {word_of(candidate.deck.schedule.recompute), word_of(deck.deck.schedule.recompute)}}};
  std::string text;
  for (const auto& [name, values] : choices)
    if (values.first != values.second)
      text += std::string(text.empty() ? "" : ", ") + name + " " + values.second + " -> " + values.first;
  return text.empty() ? "the deck's own grid" : text;
}

void print_search_table(std::ostream& out, const GridSearch& search) {
  out << "  rank  step        tokens/s   FLOP/s/dev  MFU     bubble  memory     grid\n";
  char line[160];
  for (std::size_t i = 0; i < search.fastest.size(); ++i) {
    const GridCandidate& c = search.fastest[i];
    const StepPrediction& p = c.prediction;
    const double memory =
        static_cast<double>(*std::max_element(p.memory_per_rank_bytes.begin(), p.memory_per_rank_bytes.end()));
    std::snprintf(line, sizeof line, "  %4zu  %-10s  %-9s  %-11s  %-6s  %-6s  %-9s  ", i + 1,
                  seconds_text(p.step_time_s).c_str(), human_count(p.tokens_per_s).c_str(),
                  human_flops(p.flops_per_device).c_str(), percent(p.mfu).c_str(), percent(p.bubble).c_str(),
                  human_bytes(memory).c_str());
    out << line << grid_text(c.deck, p) << "\n";
  }
}

// Where the deck's step goes, and for the first three: where theirs goes and what changed.
void print_search_explained(std::ostream& out, const Machine& machine, const GridSearch& search) {
  const StepPrediction& deck = search.deck_grid.prediction;
  out << "  the deck: " << grid_text(search.deck_grid.deck, deck) << ": " << seconds_text(deck.step_time_s);
  if (deck.fits)
    out << ", " << search.faster_than_deck << (search.faster_than_deck == 1 ? " grid" : " grids")
        << " that fit predicted faster\n";
  else
    out << ", does NOT fit in " << human_bytes(machine.device_memory_bytes) << "\n";
  for (std::size_t i = 0; i < std::min<std::size_t>(3, search.fastest.size()); ++i) {
    const GridCandidate& candidate = search.fastest[i];
    const StepPrediction& p = candidate.prediction;
    out << "  #" << i + 1 << ": computing " << share_text(p.pipeline_s - p.bubble * p.pipeline_s, p.step_time_s)
        << " (TP collectives " << seconds_text(p.tp_comm_s)
        << (p.cp_comm_s > 0 ? ", CP ring " + seconds_text(p.cp_comm_s) : std::string()) << " of it), bubble "
        << share_text(p.bubble * p.pipeline_s, p.step_time_s) << "; after the pipeline: DP "
        << seconds_text(p.dp_exposed_s) << ", optimizer " << seconds_text(p.optimizer_s) << ", embedding sync "
        << seconds_text(p.embedding_sync_s) << "\n";
    out << "      against the deck: " << choice_changes(candidate, search.deck_grid) << "; " << part_changes(p, deck)
        << "\n";
  }
}

}  // namespace

void print_search(std::ostream& out, const Machine& machine, int devices, const GridSearch& search) {
  out << "\nFastest grids on " << devices << " devices of " << machine.name << " (" << machine.path
      << "): " << search.predicted << " predicted, " << search.over_memory << " over the device's "
      << human_bytes(machine.device_memory_bytes) << "\n";
  if (search.fastest.empty()) {
    out << "  none fits: more devices, full recomputation or ZeRO-1 (parallel.zero = 1) may help\n";
    return;
  }
  print_search_table(out, search);
  print_search_explained(out, machine, search);
}

void print_search_json(std::ostream& out, const Machine& machine, int devices, const GridSearch& search) {
  toml::array candidates;
  for (const GridCandidate& c : search.fastest) candidates.push_back(prediction_table(c.deck, machine, c.prediction));
  const toml::table object{{"devices", devices},
                           {"predicted", search.predicted},
                           {"over_memory", search.over_memory},
                           {"candidates", candidates},
                           {"deck", prediction_table(search.deck_grid.deck, machine, search.deck_grid.prediction)},
                           {"faster_than_deck", search.faster_than_deck}};
  out << toml::json_formatter{object} << "\n";
}

}  // namespace trident
