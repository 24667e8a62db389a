// Per-rank recording of timeline events during a step, their collection on world rank 0 for the
// timeline's /events table, and the pipeline bubble measured from them.
#pragma once

#include <mpi.h>

#include <vector>

#include "comm/timed_comm.hpp"
#include "common/timeline_event.hpp"
#include "io/timeline_writer.hpp"
#include "plan/layout.hpp"

namespace trident {

// The events one rank records during a step, in the order they happen (times from RunClock).
// Recording is a push_back into memory that is kept across clear(), so a step costs no
// allocation once the first step has sized the buffer.
class EventLog {
 public:
  void record(const TimelineEvent& event) { events_.push_back(event); }
  std::vector<TimelineEvent>& events() { return events_; }
  const std::vector<TimelineEvent>& events() const { return events_; }
  void clear() { events_.clear(); }

 private:
  std::vector<TimelineEvent> events_;
};

// The TP group's collectives, the CP group's ring hops and the EP group's all-to-alls since the last
// call, one event per kind (ALLREDUCE_TP, ALLGATHER_TP, REDUCE_SCATTER_TP, RING_CP, ALLTOALL_EP) on
// the run's clock (none for a group of
// one, where they are no-ops): as long as the rank was blocked in that kind, laid end to end from
// each kind's first call so that they never overlap (the blocked intervals themselves are
// disjoint, so the last still ends within the action). `to_run_clock`: the run's clock minus
// steady_seconds().
std::vector<TimelineEvent> take_collective_events(TimedComm& tp, TimedComm& cp, TimedComm& ep, double to_run_clock);

// Collective over `world`: every rank's events, tagged with its world rank, its grid coordinates
// (`at`, its own) and `step`, gathered to world rank 0 (one MPI_Gatherv). On rank 0 the rows are
// sorted by rank, then t_start; other ranks get an empty vector.
std::vector<EventRow> gather_events(MPI_Comm world, const EventLog& log, const GridCoords& at, int step);

// Idle fraction of the pipeline over one step's events:
//
//   bubble = 1 − Σ (t_end − t_start) over compute events (F, B, I, W) of all ranks
//                ─────────────────────────────────────────────────────────────────
//                             ranks × span
//
// with span = latest t_end − earliest t_start over those compute events. It is the share of
// rank-time, between the first compute starting anywhere and the last one ending anywhere, in
// which a rank was not computing: waiting for pipeline messages, all-reduces and any skew between
// ranks count as bubble; the optimizer, after the last backward, does not. For 1F1B with p stages,
// m micro-batches and equal-length stages this is the theory's (p − 1) / (m + p − 1).
// `ranks` is the number of ranks whose events `rows` holds (world size; a rank without compute
// events counts as idle throughout). Returns 0 when there is no compute event or no span.
// Pass one step's rows: spans of several steps would count the time between steps as idle.
double measured_bubble(const std::vector<EventRow>& rows, int ranks);

}  // namespace trident
