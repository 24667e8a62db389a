#include "schedule/messages.hpp"

namespace trident {
namespace {

int message_tag(int microbatch, int receiving_virtual_stage, Direction direction, int virtual_stages) {
  return (microbatch * virtual_stages + receiving_virtual_stage) * 2 + static_cast<int>(direction);
}

// The message that `compute` (on virtual stage `own`) sends to, or receives from, virtual stage
// `other`, which pipeline rank owner[other] holds.
StepOp message(OpKind kind, const StepOp& compute, int own, int other, Direction direction,
               const std::vector<int>& owner) {
  StepOp op = compute;
  op.kind = kind;
  op.peer = owner[other];
  op.peer_virtual_stage = other;
  op.direction = direction;
  const int receiver = kind == OpKind::recv ? own : other;
  op.tag = message_tag(compute.action.microbatch, receiver, direction, static_cast<int>(owner.size()));
  return op;
}

void lower_action(const Schedule& schedule, int rank, int index, const std::vector<int>& owner,
                  std::vector<StepOp>& ops) {
  const Action& action = schedule.actions[rank][index];
  const int own = schedule.virtual_stage[rank][action.chunk];
  const int last = schedule.virtual_stages() - 1;
  const StepOp compute{OpKind::compute, action, index};
  switch (action.kind) {
    case ActionKind::forward:
      if (own > 0) ops.push_back(message(OpKind::recv, compute, own, own - 1, Direction::activation, owner));
      ops.push_back(compute);
      if (own < last) ops.push_back(message(OpKind::send, compute, own, own + 1, Direction::activation, owner));
      return;
    case ActionKind::backward:
    case ActionKind::input_grad:
      if (own < last) ops.push_back(message(OpKind::recv, compute, own, own + 1, Direction::gradient, owner));
      ops.push_back(compute);
      if (own > 0) ops.push_back(message(OpKind::send, compute, own, own - 1, Direction::gradient, owner));
      return;
    case ActionKind::weight_grad:
      ops.push_back(compute);
      return;
  }
}

}  // namespace

const char* direction_name(Direction direction) {
  return direction == Direction::activation ? "activation" : "gradient";
}

LoweredSchedule lower_schedule(const Schedule& schedule) {
  std::vector<int> owner(schedule.virtual_stages());
  for (int rank = 0; rank < schedule.stages; ++rank) {
    for (int stage : schedule.virtual_stage[rank]) owner[stage] = rank;
  }
  LoweredSchedule lowered(schedule.stages);
  for (int rank = 0; rank < schedule.stages; ++rank) {
    for (int index = 0; index < static_cast<int>(schedule.actions[rank].size()); ++index) {
      lower_action(schedule, rank, index, owner, lowered[rank]);
    }
  }
  return lowered;
}

}  // namespace trident
