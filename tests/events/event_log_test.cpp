// Gathering every rank's events to rank 0, and the bubble measured from events, against values
// worked out by hand.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "train/event_log.hpp"

namespace trident {
namespace {

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

TimelineEvent event(EventKind kind, double t_start, double t_end, std::int32_t microbatch = -1,
                    std::int64_t bytes = 0) {
  TimelineEvent e;
  e.kind = kind;
  e.microbatch = microbatch;
  e.chunk = microbatch < 0 ? -1 : 0;
  e.t_start = t_start;
  e.t_end = t_end;
  e.bytes = bytes;
  return e;
}

EventRow row(std::int32_t rank, const TimelineEvent& e) {
  EventRow r;
  r.rank = r.pp = rank;
  r.event = e;
  return r;
}

// Rank r records `events_of(r)` events, newest first, so that rank 0 must sort them.
int events_of(int rank) { return rank % 2 == 1 ? 0 : rank + 2; }  // odd ranks record nothing

TEST(GatherEvents, RankZeroGetsEveryRanksEventsTaggedAndSorted) {
  const int rank = world_rank();
  EventLog log;
  for (int i = events_of(rank) - 1; i >= 0; --i)
    log.record(event(i % 2 == 0 ? EventKind::forward : EventKind::send, 10.0 * rank + i, 10.0 * rank + i + 0.5,
                     /*microbatch=*/i, /*bytes=*/1000 * rank + i));
  const GridCoords at{.tp = rank % 2, .cp = rank % 3, .pp = rank / 2, .dp = 100 + rank};
  const std::vector<EventRow> rows = gather_events(MPI_COMM_WORLD, log, at, /*step=*/7);
  if (rank != 0) {
    EXPECT_TRUE(rows.empty());
    return;
  }
  std::size_t expected = 0;
  for (int r = 0; r < world_size(); ++r) expected += static_cast<std::size_t>(events_of(r));
  ASSERT_EQ(rows.size(), expected);

  std::size_t next = 0;
  for (int r = 0; r < world_size(); ++r) {
    for (int i = 0; i < events_of(r); ++i, ++next) {
      const EventRow& got = rows[next];
      EXPECT_EQ(got.rank, r) << "row " << next;
      EXPECT_EQ(got.tp, r % 2);
      EXPECT_EQ(got.cp, r % 3);
      EXPECT_EQ(got.pp, r / 2);
      EXPECT_EQ(got.dp, 100 + r);
      EXPECT_EQ(got.step, 7);
      EXPECT_EQ(got.event.kind, i % 2 == 0 ? EventKind::forward : EventKind::send);
      EXPECT_EQ(got.event.microbatch, i);
      EXPECT_EQ(got.event.t_start, 10.0 * r + i);
      EXPECT_EQ(got.event.t_end, 10.0 * r + i + 0.5);
      EXPECT_EQ(got.event.bytes, 1000 * r + i);
    }
  }
}

TEST(GatherEvents, NothingRecordedAnywhereGivesNoRows) {
  const EventLog log;
  EXPECT_TRUE(gather_events(MPI_COMM_WORLD, log, {}, 1).empty());
}

TEST(GatherEvents, ClearKeepsNothingForTheNextStep) {
  EventLog log;
  log.record(event(EventKind::optimizer, 0.0, 1.0));
  log.clear();
  log.record(event(EventKind::forward, 2.0, 3.0, 0));
  const std::vector<EventRow> rows = gather_events(MPI_COMM_WORLD, log, {}, 2);
  if (world_rank() == 0) {
    ASSERT_EQ(rows.size(), static_cast<std::size_t>(world_size()));
    for (const EventRow& r : rows) EXPECT_EQ(r.event.kind, EventKind::forward);
  }
}

// Each rank computes for one unit in its own unit interval [r, r + 1]: a staircase in which
// every rank idles for all but 1 of the `size` units, so the bubble is 1 − 1/size.
TEST(MeasuredBubble, OfGatheredStaircase) {
  const int rank = world_rank();
  EventLog log;
  log.record(event(EventKind::forward, rank, rank + 1.0, 0));
  log.record(event(EventKind::recv, -5.0, rank));  // waits are not compute: outside the span
  const std::vector<EventRow> rows = gather_events(MPI_COMM_WORLD, log, {.pp = rank}, 1);
  if (rank == 0) {
    EXPECT_NEAR(measured_bubble(rows, world_size()), 1.0 - 1.0 / world_size(), 1e-12);
  }
}

TEST(MeasuredBubble, TwoStagesOneMicrobatchByHand) {
  // Stage 0 runs F, sends; stage 1 receives, runs F and B, sends back; stage 0 runs B, then
  // steps its optimizer (not compute: outside the span).
  const std::vector<EventRow> rows = {
      row(0, event(EventKind::forward, 0.0, 1.0, 0)),       row(0, event(EventKind::send, 1.0, 1.1, 0, 64)),
      row(1, event(EventKind::recv, 0.0, 1.1, 0, 64)),      row(1, event(EventKind::forward, 1.1, 2.1, 0)),
      row(1, event(EventKind::backward, 2.1, 4.1, 0)),      row(1, event(EventKind::send, 4.1, 4.2, 0, 64)),
      row(0, event(EventKind::recv, 1.1, 4.2, 0, 64)),      row(0, event(EventKind::backward, 4.2, 6.2, 0)),
      row(0, event(EventKind::optimizer, 6.2, 7.0)),
  };
  // busy = 1 + 1 + 2 + 2 = 6 s; span = 6.2 − 0 = 6.2 s; 1 − 6 / (2 × 6.2) = 6.4 / 12.4.
  EXPECT_NEAR(measured_bubble(rows, 2), 6.4 / 12.4, 1e-12);
  // A third rank without compute events idles throughout: 1 − 6 / (3 × 6.2).
  EXPECT_NEAR(measured_bubble(rows, 3), 1.0 - 6.0 / 18.6, 1e-12);
}

TEST(MeasuredBubble, UniformPipelineMatchesTheory) {
  // GPipe order with forward and backward of 1 s each: stage s runs forward i in [s + i, s + i + 1]
  // and, after the last stage turns around at m + p − 1, backward i in
  // [m + p − 1 + (p − 1 − s) + i, … + 1]. Its bubble is the 1F1B theory's (p − 1) / (m + p − 1).
  const int p = 4;
  const int m = 8;
  std::vector<EventRow> rows;
  for (int s = 0; s < p; ++s) {
    for (int i = 0; i < m; ++i) {
      rows.push_back(row(s, event(EventKind::forward, s + i, s + i + 1.0, i)));
      const double b = m + p - 1 + (p - 1 - s) + i;
      rows.push_back(row(s, event(EventKind::backward, b, b + 1.0, i)));
    }
  }
  EXPECT_NEAR(measured_bubble(rows, p), (p - 1.0) / (m + p - 1.0), 1e-12);
  // Split backwards (B = I + W) are compute too: same busy time, same bubble.
  std::vector<EventRow> split;
  for (const EventRow& r : rows) {
    if (r.event.kind != EventKind::backward) {
      split.push_back(r);
      continue;
    }
    const double middle = 0.5 * (r.event.t_start + r.event.t_end);
    split.push_back(row(r.rank, event(EventKind::input_grad, r.event.t_start, middle, r.event.microbatch)));
    split.push_back(row(r.rank, event(EventKind::weight_grad, middle, r.event.t_end, r.event.microbatch)));
  }
  EXPECT_NEAR(measured_bubble(split, p), (p - 1.0) / (m + p - 1.0), 1e-12);
}

TEST(MeasuredBubble, ZeroWithoutComputeEvents) {
  EXPECT_EQ(measured_bubble({}, 4), 0.0);
  EXPECT_EQ(measured_bubble({row(0, event(EventKind::allreduce_dp, 0.0, 1.0))}, 1), 0.0);
  EXPECT_EQ(measured_bubble({row(0, event(EventKind::forward, 1.0, 1.0, 0))}, 1), 0.0);  // no span
  // One rank computing the whole span has no bubble.
  EXPECT_NEAR(measured_bubble({row(0, event(EventKind::forward, 0.0, 1.0, 0)),
                               row(0, event(EventKind::backward, 1.0, 3.0, 0))},
                              1),
              0.0, 1e-12);
}

}  // namespace
}  // namespace trident
