// The one dependency rule of a lowered schedule (messages.hpp): every rank runs its ops in order; a
// RECV ends once the SEND with its tag has run (plus one message's latency between two ranks; a
// hand-off between two chunks of one rank is free); a B or I runs only after its own F (whose
// activations it reads) on the same rank. Sends never block. The validator
// walks a schedule under this rule with unit costs to prove it completes, the simulator walks it
// with the deck's costs to predict the step, and the executor runs the same ops for real.
//
// Pure C++: no MPI, no Kokkos.
#pragma once

#include <functional>
#include <vector>

#include "schedule/messages.hpp"

namespace trident {

bool needs_own_forward(ActionKind kind);  // B and I

struct OpTimes {
  double start = 0.0, end = 0.0;
};

struct ScheduleWalk {
  std::vector<std::vector<OpTimes>> times;  // per rank, per op that ran (a prefix of its ops)
  // Per rank: the op it could not run (a RECV whose message never came, or a B or I before its own
  // F); its op count when it finished.
  std::vector<int> stopped_at;

  bool complete(const LoweredSchedule& lowered) const;
};

// `duration(rank, op)` of each COMPUTE op; SEND and RECV take no time of their own.
ScheduleWalk walk_schedule(const LoweredSchedule& lowered,
                           const std::function<double(int rank, const StepOp& op)>& duration, double p2p_latency);

}  // namespace trident
