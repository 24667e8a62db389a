// A pipeline schedule is plain data (DESIGN.md "Schedules are data"): for every pipeline rank, the
// ordered list of actions it runs in one training step. It can be printed, validated, simulated
// and executed; the executor (src/pipeline) runs exactly this list and the timeline records it.
//
// Pure C++: no MPI, no Kokkos.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedule/registry.hpp"

namespace trident {

// F: forward. B: backward (input gradient and weight gradient together). Zero-bubble schedules
// split B into I (input gradient, which the previous stage waits for) and W (weight gradient,
// which nobody waits for and can fill bubbles).
enum class ActionKind : std::uint8_t { forward, backward, input_grad, weight_grad };

char action_letter(ActionKind kind);  // 'F', 'B', 'I', 'W'

struct Action {
  ActionKind kind = ActionKind::forward;
  int microbatch = 0;  // 0 .. m − 1
  int chunk = 0;       // which of this rank's model chunks (0 .. v − 1)

  bool operator==(const Action&) const = default;
};

// "F3", "B0", "I2.1" (micro-batch 2 of chunk 1; the chunk is shown only when v > 1).
std::string to_string(const Action& action, int chunks);

struct Schedule {
  ScheduleKind kind = ScheduleKind::one_f_one_b;  // the generator that made it (never automatic; file: read)
  int stages = 1;        // p: pipeline ranks
  int microbatches = 1;  // m
  int chunks = 1;        // v: model chunks per rank
  ChunkPlacement placement = ChunkPlacement::interleaved;  // where virtual_stage puts them
  // virtual_stage[rank][chunk]: position of that chunk in the model, 0 .. p·v − 1. Virtual stage
  // 0 holds the embedding, p·v − 1 the head and the loss; F of micro-batch j on virtual stage s
  // needs F of j on s − 1; B (or I) of j on s needs B (or I) of j on s + 1.
  std::vector<std::vector<int>> virtual_stage;
  std::vector<std::vector<Action>> actions;  // per rank, in execution order
  // Evaluation: every micro-batch runs F only (see forward_only_schedule).
  bool forward_only = false;

  int virtual_stages() const { return stages * chunks; }
  int rank_of(int virtual_stage_index) const;
  int chunk_of(int virtual_stage_index) const;
  bool splits_backward() const;  // uses I and W rather than B
};

// The schedule `kind` for p stages, m micro-batches and v chunks per rank (activation_budget:
// v-half's, schedule.activation_budget). Throws InputError (common/error.hpp) naming the rule a
// combination breaks, e.g. interleaved-1f1b needs v >= 2, zb-v v = 2. `automatic` is not made here
// (std::logic_error; see choose_auto_schedule).
Schedule make_schedule(ScheduleKind kind, int stages, int microbatches, int chunks, double activation_budget = 0.5);
// The same from a request, which may also give the costs to order the V shapes for (re-planning).
Schedule make_schedule(ScheduleKind kind, const ScheduleRequest& request);

// A schedule of `kind`'s shape, its chunks placed as the kind places them (schedule/placement.hpp),
// without actions yet: where the generators start.
Schedule empty_schedule(ScheduleKind kind, int stages, int microbatches, int chunks);
Schedule empty_schedule(ScheduleKind kind, int stages, int microbatches, int chunks, ChunkPlacement placement);

// The forward passes of `training` alone, for evaluation on the same ranks and chunks: each rank
// runs its chunks in model order, every micro-batch through one chunk before the next chunk (as
// GPipe's forward half; nothing is stashed for a backward, so the order costs no memory).
Schedule forward_only_schedule(const Schedule& training);

// Empty when `schedule` is complete (every micro-batch runs F and B, or F, I and W, exactly once
// on every virtual stage, W after its I; F alone when forward_only) and deadlock-free (running each rank's list in
// order, with every send non-blocking and each receive waited for by the action that needs it, all ranks finish).
// Otherwise one sentence naming the first problem: the rank, the action and why.
std::string find_schedule_problem(const Schedule& schedule);

// Time of each kind of action on each virtual stage (seconds or any unit), and of one p2p message.
struct ActionCosts {
  struct Stage {
    double forward = 1.0, backward = 2.0, input_grad = 1.0, weight_grad = 1.0;
  };
  std::vector<Stage> per_virtual_stage;  // p·v entries
  double p2p_latency = 0.0;

  // Every virtual stage the same: a whole stage's F, B, I, W divided by the chunks per rank.
  static ActionCosts uniform(int virtual_stages, int chunks, double forward = 1.0, double backward = 2.0,
                             double input_grad = 1.0, double weight_grad = 1.0, double p2p_latency = 0.0);
};

struct TimedAction {
  Action action;
  double start = 0.0, end = 0.0;
};

struct SimulatedStep {
  std::vector<std::vector<TimedAction>> per_rank;  // same order as Schedule::actions
  double step_time = 0.0;                          // last end over all ranks
  double bubble = 0.0;                             // 1 − busy / (p · step_time)
  // Per rank: the most micro-batch chunks whose F has run and whose B (or W) has not, at any time.
  std::vector<int> peak_in_flight;
};

// Each rank runs its list in order, an action starting as soon as the previous one on its rank
// ended and its input arrived (end of the producing action + p2p_latency when on another rank).
// Requires find_schedule_problem(schedule) to be empty.
SimulatedStep simulate(const Schedule& schedule, const ActionCosts& costs);

// "auto": among the schedules the generators make for (p, m) with up to max_chunks chunks per rank,
// the one with the lowest simulated bubble (costs: ActionCosts::uniform) whose peak activation
// memory, in micro-batches of a whole stage (peak in-flight chunks / v), stays within
// memory_limit (0 = p, what 1F1B holds). Its kind names the chosen generator ("auto → zb-h1" is
// left to the caller to print). Throws InputError when none fits.
Schedule choose_auto_schedule(int stages, int microbatches, int max_chunks, double memory_limit);

// Why choose_auto_schedule chose what it did, in one line: the choice with its simulated bubble
// and memory, the other candidates that fit by bubble, and those over the limit by memory.
std::string explain_auto_choice(int stages, int microbatches, int max_chunks, double memory_limit);

// The classic diagram: one line per rank, time to the right, one cell per time unit of the
// simulated step, each action drawn as its letter and micro-batch ("F0F0B0B0B0B0...") and idle
// time as dots, plus a legend line. Wraps at `width` characters.
std::string render_schedule(const Schedule& schedule, const SimulatedStep& timing, int width = 120);

// Plain listing, one line per rank: "rank 0: F0 F1 B0 F2 B1 B2" (the golden-file format).
std::string list_actions(const Schedule& schedule);

}  // namespace trident
