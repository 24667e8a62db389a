// The small vocabulary of schedules: action letters and names, where a virtual stage lives, and
// the uniform cost model. Everything else in this module builds on these.
#include <string>

#include "common/error.hpp"
#include "schedule/schedule.hpp"

namespace trident {

char action_letter(ActionKind kind) {
  switch (kind) {
    case ActionKind::forward: return 'F';
    case ActionKind::backward: return 'B';
    case ActionKind::input_grad: return 'I';
    case ActionKind::weight_grad: return 'W';
  }
  return '?';  // unreachable for a valid enum value; keeps -Wreturn-type quiet
}

std::string to_string(const Action& action, int chunks) {
  std::string text(1, action_letter(action.kind));
  text += std::to_string(action.microbatch);
  // With one chunk per rank the chunk number carries no information; leave it out so that
  // non-interleaved listings read like the papers' diagrams.
  if (chunks > 1) {
    text += '.';
    text += std::to_string(action.chunk);
  }
  return text;
}

// The table virtual_stage[rank][chunk] is the one source of truth: generators may place chunks
// however they like (interleaved puts chunk c of rank r at c·p + r), so invert it by search.
int Schedule::rank_of(int virtual_stage_index) const {
  for (int rank = 0; rank < static_cast<int>(virtual_stage.size()); ++rank) {
    for (int stage : virtual_stage[rank]) {
      if (stage == virtual_stage_index) return rank;
    }
  }
  throw InputError("virtual stage " + std::to_string(virtual_stage_index) +
                   " is not placed on any rank of this schedule (it has " +
                   std::to_string(virtual_stages()) + " virtual stages)");
}

int Schedule::chunk_of(int virtual_stage_index) const {
  for (const std::vector<int>& chunks_of_rank : virtual_stage) {
    for (int chunk = 0; chunk < static_cast<int>(chunks_of_rank.size()); ++chunk) {
      if (chunks_of_rank[chunk] == virtual_stage_index) return chunk;
    }
  }
  throw InputError("virtual stage " + std::to_string(virtual_stage_index) +
                   " is not placed on any rank of this schedule (it has " +
                   std::to_string(virtual_stages()) + " virtual stages)");
}

bool Schedule::splits_backward() const {
  for (const std::vector<Action>& rank_actions : actions) {
    for (const Action& action : rank_actions) {
      if (action.kind == ActionKind::input_grad || action.kind == ActionKind::weight_grad) return true;
    }
  }
  return false;
}

ActionCosts ActionCosts::uniform(int virtual_stages, int chunks, double forward, double backward,
                                 double input_grad, double weight_grad, double p2p_latency) {
  if (virtual_stages < 1 || chunks < 1) {
    throw InputError("uniform action costs need at least one virtual stage and one chunk per rank (got " +
                     std::to_string(virtual_stages) + " virtual stages, " + std::to_string(chunks) +
                     " chunks)");
  }
  // The arguments describe a whole pipeline stage; a chunk holds 1/v of its layers, so each of
  // its actions takes 1/v of the time.
  const double share = 1.0 / chunks;
  ActionCosts costs;
  costs.per_virtual_stage.assign(virtual_stages, Stage{forward * share, backward * share,
                                                       input_grad * share, weight_grad * share});
  costs.p2p_latency = p2p_latency;
  return costs;
}

}  // namespace trident
