#include "predict/search.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "plan/layout.hpp"

namespace trident {
namespace {

std::vector<int> divisors(int n) {
  std::vector<int> result;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) result.push_back(d);
  return result;
}

struct ScheduleChoice {
  ScheduleKind kind;
  int chunks;
};

// The registry's search kinds that run (pp, m), with their fewest chunks, several chunks only where
// each holds a layer at least. With one stage every kind runs each micro-batch's forward then its backward: 1F1B alone.
std::vector<ScheduleChoice> schedule_choices(int pp, int layers, int microbatches) {
  if (pp == 1) return {{ScheduleKind::one_f_one_b, 1}};
  std::vector<ScheduleChoice> choices;
  for (const ScheduleType& type : schedule_types()) {
    const int chunks = type.chunks == ChunkRule::one ? 1 : 2;
    if (type.in_search && (chunks == 1 || pp * chunks <= layers) && runs_on(type, pp, microbatches, chunks))
      choices.push_back({type.kind, chunks});
  }
  return choices;
}

// The context-parallel sizes the deck's model can run on `devices` ranks with tp: whole chunks of
// positions (seq_len a multiple of 2 · cp, and of tp under sequence parallelism), on the tiled kernel.
std::vector<int> cp_choices(const Deck& deck, int devices, int tp) {
  if (deck.model.moe.experts > 0) return {1};  // [model.moe] runs without context parallelism
  std::vector<int> choices;
  for (const int cp : divisors(devices)) {
    const int seq_len = deck.model.seq_len;
    if (cp > 1 && (deck.model.attention != AttentionKernel::tiled || seq_len % (2 * cp) != 0)) continue;
    if (deck.parallel.sequence_parallel && (seq_len / cp) % tp != 0) continue;
    choices.push_back(cp);
  }
  return choices;
}

// The expert-parallel sizes for dp replicas: 1 for a dense model, else those dividing dp and the
// experts.
std::vector<int> ep_choices(const Deck& deck, int dp) {
  if (deck.model.moe.experts == 0) return {1};
  return divisors(std::gcd(dp, deck.model.moe.experts));
}

Deck candidate_deck(const Deck& deck, GridCoords sizes, int ep, int micro_batch_size, int microbatches,
                    ScheduleChoice schedule, Recompute recompute) {
  Deck candidate = deck;
  candidate.parallel.tp = sizes.tp;
  candidate.parallel.cp = sizes.cp;
  candidate.parallel.pp = sizes.pp;
  candidate.parallel.dp = sizes.dp;
  candidate.parallel.ep = ep;
  candidate.parallel.stage_layers.clear();  // the deck's split was for its own pipeline
  candidate.schedule.micro_batch_size = micro_batch_size;
  candidate.schedule.microbatches = microbatches;
  candidate.schedule.kind = schedule.kind;
  candidate.schedule.virtual_stages = schedule.chunks;
  candidate.schedule.recompute = recompute;
  return candidate;
}

// Predicts one candidate and files it: among the fastest when it fits, counted either way.
void add_candidate(GridSearch& search, const Machine& machine, Deck deck) {
  GridCandidate candidate{std::move(deck), {}};
  try {
    candidate.prediction = predict_step(candidate.deck, machine);
  } catch (const std::exception&) {
    return;  // a combination the generators refuse
  }
  ++search.predicted;
  if (!candidate.prediction.fits) {
    ++search.over_memory;
    return;
  }
  search.fastest.push_back(std::move(candidate));
}

// Every micro-batch size, schedule, recomputation and expert-parallel size on the grid `sizes`.
void add_grid_candidates(GridSearch& search, const Machine& machine, const Deck& deck, GridCoords sizes,
                         const std::vector<Recompute>& recomputes) {
  const int sequences = deck.global_batch_sequences();
  for (const int micro_batch_size : {1, 2, 4, 8}) {
    if ((sequences / sizes.dp) % micro_batch_size != 0) continue;
    const int microbatches = sequences / sizes.dp / micro_batch_size;
    for (const ScheduleChoice schedule : schedule_choices(sizes.pp, deck.model.layers, microbatches))
      for (const Recompute recompute : recomputes)
        for (const int ep : ep_choices(deck, sizes.dp))
          add_candidate(search, machine,
                        candidate_deck(deck, sizes, ep, micro_batch_size, microbatches, schedule, recompute));
  }
}

}  // namespace

GridSearch search_grids(const Deck& deck, const Machine& machine, int devices, int limit) {
  machine.peak_flops(deck.train.precision);  // a missing peak is the file's problem, not a candidate's
  const int sequences = deck.global_batch_sequences();
  // Selective recomputation drops the explicit kernel's probabilities; the tiled kernel keeps none.
  std::vector<Recompute> recomputes{Recompute::none, Recompute::full};
  if (deck.model.attention == AttentionKernel::explicit_probabilities) recomputes.push_back(Recompute::selective);
  GridSearch search;
  for (const int tp : divisors(devices)) {
    if (tp > machine.devices_per_node || deck.model.heads % tp != 0 || deck.model.key_value_heads() % tp != 0) continue;
    for (const int cp : cp_choices(deck, devices / tp, tp)) {
      for (const int pp : divisors(devices / (tp * cp))) {
        const int dp = devices / (tp * cp * pp);
        if (pp > deck.model.layers || sequences % dp != 0) continue;
        add_grid_candidates(search, machine, deck, {.tp = tp, .cp = cp, .pp = pp, .dp = dp}, recomputes);
      }
    }
  }
  search.deck_grid = {deck, predict_step(deck, machine)};
  search.faster_than_deck = static_cast<int>(std::ranges::count_if(search.fastest, [&](const GridCandidate& c) {
    return c.prediction.step_time_s < search.deck_grid.prediction.step_time_s;
  }));
  std::ranges::stable_sort(search.fastest, {}, [](const GridCandidate& c) { return c.prediction.step_time_s; });
  if (static_cast<int>(search.fastest.size()) > limit) search.fastest.resize(limit);
  return search;
}

}  // namespace trident
