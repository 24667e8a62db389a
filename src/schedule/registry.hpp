// The pipeline schedules trident runs (DESIGN.md "Schedules are data"), one line each in
// registry.cpp's table: the deck's word, where the kind places a rank's chunks, how many chunks a
// rank holds and which micro-batch counts it runs, its generator, the activations its theory says a
// rank holds, the closed form of its bubble, and the lists it joins (auto, re-planning, `plan
// --search`). The deck's words and rules, the planner's memory and bubble theory, auto, re-planning
// and the grid search read that table, so a new schedule is a generator and one line there (and its
// name in ScheduleKind). Pure C++: no MPI, no Kokkos.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/choice.hpp"

namespace trident {

struct Schedule;
struct ActionCosts;

// schedule.kind. Two are no generator of their own: `automatic` ("auto") picks one of the others
// (schedule/schedule.hpp's choose_auto_schedule), and `file` reads the action lists of
// schedule.file (schedule/csv_schedule.hpp).
enum class ScheduleKind { gpipe, one_f_one_b, interleaved_1f1b, zb_h1, zb_v, v_half, dualpipe_v, automatic, file };
std::span<const Choice<ScheduleKind>> choices(ScheduleKind);

// Where each rank's model chunks sit, which the schedule's kind decides (schedule/placement.hpp maps
// chunks to virtual stages):
//   interleaved  chunk c of rank r is virtual stage c·pp + r: one chunk is the plain pipeline, more
//                are Megatron's interleaving (each rank holds every pp-th piece of the model);
//   v_shape      two chunks, rank r holding virtual stages r and 2·pp − 1 − r: the model runs down
//                the ranks and back up (zb-v, v-half, dualpipev), so rank 0 holds both the
//                embedding and the head, and the turn from virtual stage pp − 1 to pp stays inside
//                rank pp − 1.
enum class ChunkPlacement { interleaved, v_shape };

// The model chunks (schedule.virtual_stages) a rank holds: one, two in a V, or two or more.
enum class ChunkRule { one, two_in_a_v, two_or_more };

// The closed form of the bubble with equal stages and free messages: gpipe's and 1f1b's
// (p − 1)/(m + p − 1), Megatron's interleaved (p − 1)/(v·m + p − 1), or none, below 1F1B's (the
// zero-bubble kinds: their simulated step is the number).
enum class BubbleTheory { textbook, interleaved, below_textbook };

// What a generator is asked for.
struct ScheduleRequest {
  int stages = 1;                      // p
  int microbatches = 1;                // m
  int chunks = 1;                      // v, chunks per rank
  double activation_budget = 0.5;      // v-half's share of 1F1B's activations (schedule.activation_budget)
  const ActionCosts* costs = nullptr;  // the costs to order the V shapes for (re-planning); null: equal stages
};

struct ScheduleType {
  ScheduleKind kind;
  std::string_view word;  // the deck's
  ChunkPlacement placement;
  ChunkRule chunks;
  bool microbatches_in_groups_of_stages;  // m a multiple of p (interleaving's groups of p)
  int min_microbatches_per_stage;         // m >= this · p (0: any m)
  Schedule (*generate)(const ScheduleRequest&);
  // Micro-batches whose activations rank `stage` holds at its peak, in micro-batches of a whole
  // rank (chunks in flight / v); the schedule's own peak, which the simulator counts from its lists.
  double (*peak_in_flight)(const ScheduleRequest&, int stage);
  BubbleTheory bubble;
  int auto_preference;  // auto's candidates, in this order on an equal bubble (simpler first); 0: not one
  bool in_replan;       // re-planning may switch to it from a kind of the same placement and chunks
  bool in_search;       // `plan --search` tries it
};

// Every generated schedule kind (all but `automatic` and `file`), in the deck's order of words.
std::span<const ScheduleType> schedule_types();
// The line of `kind`, or null for `automatic` and `file`.
const ScheduleType* find_schedule_type(ScheduleKind kind);
// The line of `kind`; std::logic_error for `automatic` and `file`.
const ScheduleType& schedule_type(ScheduleKind kind);

// automatic: interleaved (what it places before choosing); file: std::logic_error (the file's
// schedule knows its placement: Schedule::placement).
ChunkPlacement chunk_placement(ScheduleKind kind);

// Whether `type` runs p stages, m micro-batches and v chunks per rank (its chunk rule and its
// micro-batch rules; the generator throws InputError, with the reason, exactly where this is false).
bool runs_on(const ScheduleType& type, int stages, int microbatches, int chunks);

// The words of the kinds that hold more than one chunk per rank, in the deck's order.
std::vector<std::string_view> kinds_with_chunks();

}  // namespace trident
