// The V-shape schedules zb-v and v-half (Qi et al. 2024, "Pipeline Parallelism with Controllable
// Memory"; ZB-V in "Zero Bubble Pipeline Parallelism", 2023). Each rank holds two chunks in a V
// (schedule/registry.hpp's ChunkPlacement::v_shape), and B is split into I and W. The action order
// comes from a list scheduler that plays the step with given F, I and W costs per virtual stage
// (equal ones, or those measured when re-planning): whenever a rank is
// free it runs, in this order of preference, the oldest ready I (the critical path: the previous
// stage waits for it), the oldest ready F while the rank's activations stay under the budget, or
// the oldest pending W (which nobody waits for: it fills what would be idle time, and it frees
// its micro-batch's activations). Only when none is ready does the rank idle. The budget is counted
// in chunk activations (F run, W not yet); an F of chunk 0 keeps one place free for chunk 1, whose
// F the loss (and so every backward) waits for, so that no budget of 2 or more deadlocks.
#include "schedule/v_shape.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace trident {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();
constexpr int kChunks = 2;
constexpr long kMaxIdlesPerAction = 64;  // far above what any (p, m) needs: beyond it, a deadlock

double shortest_action(const ActionCosts& costs) {
  double shortest = kNever;
  for (const ActionCosts::Stage& stage : costs.per_virtual_stage)
    shortest = std::min({shortest, stage.forward, stage.input_grad, stage.weight_grad});
  return std::max(shortest, 1e-9);  // a free action (nothing measured) must still move time on
}

class VShapePlayer {
 public:
  VShapePlayer(Schedule& schedule, int activation_cap, const ActionCosts& costs)
      : s_(schedule),
        costs_(costs),
        p_(schedule.stages),
        m_(schedule.microbatches),
        cap_(activation_cap),
        ranks_(static_cast<std::size_t>(p_)),
        forward_done_(2 * p_, std::vector<double>(m_, kNever)),
        input_done_(2 * p_, std::vector<double>(m_, kNever)) {}

  void play() {
    for (int rank = earliest_free_rank(); rank >= 0; rank = earliest_free_rank())
      if (!run_next(rank)) idle_until_next_event(rank);
  }

 private:
  struct RankState {
    double free_at = 0.0;
    int held = 0;  // chunk activations between their F and W
    int next_forward[kChunks] = {0, 0};
    int next_input[kChunks] = {0, 0};
    std::deque<Action> pending_weights;  // I done, W not: oldest first
  };

  int vs(int rank, int chunk) const { return s_.virtual_stage[rank][chunk]; }

  int earliest_free_rank() const {
    int best = -1;
    for (int rank = 0; rank < p_; ++rank) {
      if (finished(rank)) continue;
      if (best < 0 || ranks_[rank].free_at < ranks_[best].free_at) best = rank;
    }
    return best;
  }

  std::optional<Action> ready_input(int rank, double now) const {
    const RankState& r = ranks_[rank];
    std::optional<Action> best;
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      const int j = r.next_input[chunk];
      if (j >= r.next_forward[chunk]) continue;
      const int stage = vs(rank, chunk);
      const double ready =
          stage == 2 * p_ - 1 ? forward_done_[stage][j] : input_done_[stage + 1][j] + latency(stage + 1, rank);
      if (ready <= now && (!best || j < best->microbatch)) best = Action{ActionKind::input_grad, j, chunk};
    }
    return best;
  }

  std::optional<Action> ready_forward(int rank, double now) const {
    const RankState& r = ranks_[rank];
    std::optional<Action> best;
    for (int chunk = kChunks - 1; chunk >= 0; --chunk) {  // ties: the chunk further along the model
      const int j = r.next_forward[chunk];
      const int reserved = kChunks - 1 - chunk;
      if (j >= m_ || r.held >= cap_ - reserved) continue;
      const int stage = vs(rank, chunk);
      if ((stage == 0 || forward_done_[stage - 1][j] + latency(stage - 1, rank) <= now) &&
          (!best || j < best->microbatch))
        best = Action{ActionKind::forward, j, chunk};
    }
    return best;
  }

  // Runs the preferred ready action of `rank` at its free time; false when none is ready.
  bool run_next(int rank) {
    RankState& r = ranks_[rank];
    const double now = r.free_at;
    std::optional<Action> action = ready_input(rank, now);
    if (!action) action = ready_forward(rank, now);
    if (!action && !r.pending_weights.empty()) {
      action = r.pending_weights.front();
      r.pending_weights.pop_front();
    }
    if (!action) return false;
    const int stage = vs(rank, action->chunk);
    const ActionCosts::Stage& cost = costs_.per_virtual_stage[stage];
    const double end = now + (action->kind == ActionKind::forward      ? cost.forward
                              : action->kind == ActionKind::input_grad ? cost.input_grad
                                                                       : cost.weight_grad);
    switch (action->kind) {
      case ActionKind::forward:
        forward_done_[stage][action->microbatch] = end;
        ++r.next_forward[action->chunk];
        ++r.held;
        break;
      case ActionKind::input_grad:
        input_done_[stage][action->microbatch] = end;
        ++r.next_input[action->chunk];
        r.pending_weights.push_back({ActionKind::weight_grad, action->microbatch, action->chunk});
        break;
      default:
        --r.held;
        break;
    }
    r.free_at = end;
    s_.actions[rank].push_back(*action);
    return true;
  }

  // Nothing is ready on `rank`: it waits until the next action ends, one already placed or one that
  // another rank, free no earlier than this one, could start now.
  void idle_until_next_event(int rank) {
    const double now = ranks_[rank].free_at;
    double next = kNever;
    for (const auto* done : {&forward_done_, &input_done_})
      for (const std::vector<double>& stage : *done)
        for (double end : stage)
          for (double arrival : {end, end + costs_.p2p_latency})
            if (arrival > now) next = std::min(next, arrival);
    for (int other = 0; other < p_; ++other)
      if (other != rank && !finished(other)) next = std::min(next, ranks_[other].free_at + shortest_action_);
    if (next == kNever || ++idles_ > kMaxIdlesPerAction * 6 * m_ * p_)
      throw std::logic_error("v-shape schedule: rank " + std::to_string(rank) +
                             " can never run again (p = " + std::to_string(p_) + ", m = " + std::to_string(m_) +
                             ", budget = " + std::to_string(cap_) + " chunk activations)");
    ranks_[rank].free_at = next;
  }

  // A message from virtual stage `from` to a chunk of `rank`: free within a rank.
  double latency(int from, int rank) const { return s_.rank_of(from) == rank ? 0.0 : costs_.p2p_latency; }

  bool finished(int rank) const { return static_cast<int>(s_.actions[rank].size()) == 3 * kChunks * m_; }

  Schedule& s_;
  const ActionCosts& costs_;
  double shortest_action_ = shortest_action(costs_);
  int p_, m_, cap_;
  long idles_ = 0;
  std::vector<RankState> ranks_;
  std::vector<std::vector<double>> forward_done_;  // [virtual stage][micro-batch]: end time
  std::vector<std::vector<double>> input_done_;
};

}  // namespace

int v_shape_activation_cap(ScheduleKind kind, int stages, double activation_budget) {
  const double budget = kind == ScheduleKind::zb_v ? 1.0 : activation_budget;
  return std::max(2, static_cast<int>(std::ceil(budget * 2 * stages - 1e-9)));
}

Schedule make_v_shape(ScheduleKind kind, int stages, int microbatches, double activation_budget) {
  return make_v_shape(kind, stages, microbatches, activation_budget, ActionCosts::uniform(2 * stages, kChunks));
}

Schedule make_v_shape(ScheduleKind kind, int stages, int microbatches, double activation_budget,
                      const ActionCosts& costs) {
  if (kind != ScheduleKind::zb_v && kind != ScheduleKind::v_half)
    throw std::logic_error("make_v_shape: " + word_of(kind) + " is not a V-shape schedule");
  if (!(activation_budget > 0.0 && activation_budget <= 1.0))
    throw InputError("schedule.activation_budget must be in (0, 1], got " + std::to_string(activation_budget));
  Schedule schedule = empty_schedule(kind, stages, microbatches, kChunks);
  if (static_cast<int>(costs.per_virtual_stage.size()) != 2 * stages)
    throw std::invalid_argument("make_v_shape: costs for " + std::to_string(costs.per_virtual_stage.size()) +
                                " virtual stages, not " + std::to_string(2 * stages));
  VShapePlayer(schedule, v_shape_activation_cap(kind, stages, activation_budget), costs).play();
  return schedule;
}

}  // namespace trident
