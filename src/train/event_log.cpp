#include "train/event_log.hpp"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace trident {

namespace {

// Rows travel as raw bytes: every rank runs the same binary on the same kind of machine, so the
// layout is the same everywhere, and one contiguous MPI type keeps counts in rows (not bytes)
// so that a large gather does not overflow Gatherv's int counts as early.
static_assert(std::is_trivially_copyable_v<EventRow>, "EventRow is sent as bytes");

class RowType {
 public:
  RowType() {
    MPI_Type_contiguous(static_cast<int>(sizeof(EventRow)), MPI_BYTE, &type_);
    MPI_Type_commit(&type_);
  }
  ~RowType() { MPI_Type_free(&type_); }
  RowType(const RowType&) = delete;
  RowType& operator=(const RowType&) = delete;
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// Which collectives of a group become which timeline events.
struct TalliedKind {
  Collective collective;
  EventKind event;
};

void add_tallied_events(TimedComm& group, std::initializer_list<TalliedKind> kinds, double to_run_clock,
                        std::vector<TimelineEvent>& events) {
  const CollectiveTallies tallies = group.take_collectives();
  if (group.size() == 1) return;
  for (const TalliedKind& kind : kinds) {
    const CollectiveTally& tally = tallies[static_cast<int>(kind.collective)];
    if (tally.calls == 0) continue;
    const double start = tally.first_call + to_run_clock;
    events.push_back({kind.event, -1, -1, start, start + tally.blocked_seconds, tally.bytes});
  }
}

}  // namespace

std::vector<TimelineEvent> take_collective_events(TimedComm& tp, TimedComm& cp, TimedComm& ep, double to_run_clock) {
  std::vector<TimelineEvent> events;
  add_tallied_events(tp,
                     {{Collective::all_reduce, EventKind::allreduce_tp},
                      {Collective::all_gather, EventKind::allgather_tp},
                      {Collective::reduce_scatter, EventKind::reduce_scatter_tp}},
                     to_run_clock, events);
  add_tallied_events(cp, {{Collective::point_to_point, EventKind::ring_cp}}, to_run_clock, events);
  add_tallied_events(ep, {{Collective::point_to_point, EventKind::alltoall_ep}}, to_run_clock, events);
  std::ranges::sort(events, {}, &TimelineEvent::t_start);
  for (std::size_t i = 1; i < events.size(); ++i) {
    const double shift = std::max(0.0, events[i - 1].t_end - events[i].t_start);
    events[i].t_start += shift;
    events[i].t_end += shift;
  }
  return events;
}

std::vector<EventRow> gather_events(MPI_Comm world, const EventLog& log, const GridCoords& at, int step) {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);

  std::vector<EventRow> mine;
  mine.reserve(log.events().size());
  for (const TimelineEvent& event : log.events())
    mine.push_back(EventRow{rank, at.tp, at.cp, at.pp, at.dp, step, event});
  if (mine.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::length_error("gather_events: rank " + std::to_string(rank) + " recorded more events than MPI counts");
  const int count = static_cast<int>(mine.size());

  std::vector<int> counts(rank == 0 ? size : 0);
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, world);

  // Displacements are ints too: check the total before Gatherv rather than wrap around.
  std::vector<int> displacements(counts.size());
  long long total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (total > std::numeric_limits<int>::max())
      throw std::length_error("gather_events: more events than MPI_Gatherv can place in one step");
    displacements[r] = static_cast<int>(total);
    total += counts[r];
  }
  std::vector<EventRow> rows(static_cast<std::size_t>(total));

  const RowType row_type;
  MPI_Gatherv(mine.data(), count, row_type.get(), rows.data(), counts.data(), displacements.data(), row_type.get(),
              0, world);

  // Gatherv already orders by rank; a rank's events are in recording order, which is not always
  // start order (an event is recorded when it ends, and waits can nest in actions).
  std::stable_sort(rows.begin(), rows.end(), [](const EventRow& a, const EventRow& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.event.t_start < b.event.t_start;
  });
  return rows;
}

double measured_bubble(const std::vector<EventRow>& rows, int ranks) {
  double busy = 0.0;
  double first = std::numeric_limits<double>::infinity();
  double last = -std::numeric_limits<double>::infinity();
  for (const EventRow& row : rows) {
    if (!is_compute(row.event.kind)) continue;
    busy += row.event.t_end - row.event.t_start;
    first = std::min(first, row.event.t_start);
    last = std::max(last, row.event.t_end);
  }
  const double span = last - first;  // −inf when there was no compute event
  if (ranks <= 0 || !(span > 0.0)) return 0.0;
  return 1.0 - busy / (static_cast<double>(ranks) * span);
}

}  // namespace trident
