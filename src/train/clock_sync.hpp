// One clock for every rank's timeline events (DESIGN.md "Timeline": t_start, t_end are "seconds on
// one clock common to all ranks"). MPI_Wtime is per process: Open MPI counts from each process's
// own start, and on several nodes the hardware clocks differ too. So every rank measures the
// offset of its MPI_Wtime from world rank 0's once, and RunClock reports rank 0's clock, counted
// from a start instant that all ranks share.
//
// The offset is measured once, at start-up. Clock drift (a few µs per second at worst for
// unsynchronised nodes, far less under NTP) is not followed; a run that needs µs alignment over
// hours can build a new RunClock, e.g. at checkpoints.
#pragma once

#include <mpi.h>

namespace trident {

struct ClockOffset {
  // local MPI_Wtime() − rank 0's MPI_Wtime() at the same instant: subtract it from a local
  // reading to get rank 0's clock. Exactly 0 on rank 0.
  double offset = 0.0;
  // Round trip of the ping-pong the estimate came from (0 on rank 0). By construction the
  // estimate is within round_trip / 2 of the true offset.
  double round_trip = 0.0;
};

// Collective over `world`. Cristian's algorithm: every rank in turn (one at a time, so rank 0
// answers promptly) sends rank 0 pings; for each it notes its send time t_send and receive time
// t_recv around rank 0's reading t_root. The ping with the smallest round trip gives the offset
// (t_send + t_recv) / 2 − t_root. A rank pings at least a dozen times, and on until a round trip
// of 100 µs or less, 64 pings without a shorter one, or a second (see clock_sync.cpp).
ClockOffset measure_clock_offset(MPI_Comm world);

// measure_clock_offset(world).offset: the value to subtract from local MPI_Wtime().
double estimate_clock_offset(MPI_Comm world);

// Seconds since the run's start, on rank 0's clock, the same on every rank (up to the offset
// estimate's error, about half a round trip: µs on one node). Cheap to read: MPI_Wtime and two
// subtractions.
class RunClock {
 public:
  // Collective over `world`: measures the offset and shares rank 0's start instant.
  explicit RunClock(MPI_Comm world);

  double now() const { return MPI_Wtime() - offset_ - epoch_; }

  // The offset this rank's readings are corrected by (see ClockOffset).
  double offset() const { return offset_; }
  double round_trip() const { return round_trip_; }

 private:
  double offset_ = 0.0;
  double round_trip_ = 0.0;
  double epoch_ = 0.0;  // rank 0's MPI_Wtime() when the clock was made
};

}  // namespace trident
