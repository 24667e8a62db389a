// A schedule lowered to messages (DESIGN.md "Schedules are data"): every rank's action list with the
// messages between virtual stages made explicit, as PyTorch's pipelining lowers a schedule. Each
// compute action becomes [RECV] COMPUTE [SEND]: F receives the activation from the previous virtual
// stage and sends its output to the next; B or I receives the output gradient from the next virtual
// stage and sends the input gradient back; W moves nothing. Validator, simulator and executor all
// read this one list, and one rule orders it (dependencies.hpp).
//
// Pure C++: no MPI, no Kokkos.
#pragma once

#include <cstdint>
#include <vector>

#include "schedule/schedule.hpp"

namespace trident {

enum class Direction : std::uint8_t { activation, gradient };

const char* direction_name(Direction direction);  // "activation", "gradient"

enum class OpKind : std::uint8_t { recv, compute, send };

struct StepOp {
  OpKind kind = OpKind::compute;
  Action action;         // the compute action; for RECV the one that consumes, for SEND the one that produced
  int action_index = 0;  // its position in the rank's action list (what messages name)
  // RECV and SEND only:
  int peer = -1;  // pipeline rank at the other end; this rank itself for a hand-off between two of its chunks
  int tag = 0;    // unique within a step per (micro-batch, receiving virtual stage, direction)
  Direction direction = Direction::activation;
  int peer_virtual_stage = -1;  // the virtual stage at the other end
};

using LoweredSchedule = std::vector<std::vector<StepOp>>;  // per pipeline rank, in execution order

// The lowering of a schedule whose shape is valid (find_schedule_problem checks it first).
LoweredSchedule lower_schedule(const Schedule& schedule);

}  // namespace trident
