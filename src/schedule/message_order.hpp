// Whether a schedule's pipeline messages can travel the way NCCL matches them (parallel.p2p
// "ordered" and "nccl"; DESIGN.md "Schedules are data"): without tags, in the order they are
// posted. Each ordered pair of ranks has one channel per direction (activations, gradients): a
// FIFO, so the k-th message one rank sends on it is the k-th the other receives from it. The
// executor posts sends and receives in its list's order (receives up to a few ahead), so the
// schedule is right for ordered messages exactly when, on every channel, the sender's SEND ops
// and the receiver's RECV ops name the same messages in the same order. Then each receive gets
// the message its tag would have matched, every run with ordered messages is a run with tagged
// ones, and the tagged walk of find_schedule_problem (sends never block, receives wait) proves it
// finishes, receives posted ahead included: a channel only carries one direction of one pair, so
// a receive posted early holds up nothing but the later receives of its own FIFO.
//
// One FIFO per pair for both directions instead would not do: on the V placements (zb-v, v-half,
// dualpipev) the same pair carries the first leg's activations and the second leg's gradients,
// and the two ranks interleave them differently.
//
// Pure C++: no MPI, no Kokkos.
#pragma once

#include <string>

#include "schedule/schedule.hpp"

namespace trident {

// Empty when every channel's messages pair up in posting order; otherwise one sentence naming
// the channel, the first position where sender and receiver differ and the two messages there.
// Requires find_schedule_problem(schedule) to be empty.
std::string find_message_order_problem(const Schedule& schedule);

}  // namespace trident
