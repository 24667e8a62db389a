#include "train/clock_sync.hpp"

#include <limits>

namespace trident {

namespace {

// Pings per rank: the smallest round trip of a dozen is close to the wire latency even when
// a ping or two meets a descheduled process (oversubscribed test runs, a noisy node).
constexpr int kPings = 12;
constexpr int kPingTag = 0;
constexpr int kPongTag = 1;

}  // namespace

ClockOffset measure_clock_offset(MPI_Comm world) {
  // A private communicator: our pings can never match a message of the caller's.
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(world, &comm);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);

  ClockOffset result;
  if (rank == 0) {
    // Serve the ranks in order: a rank's pings only start once rank 0 asks for them (the first
    // pong), so no rank's round trip includes time spent queueing behind another rank.
    for (int peer = 1; peer < size; ++peer) {
      for (int ping = 0; ping <= kPings; ++ping) {
        if (ping > 0) MPI_Recv(nullptr, 0, MPI_BYTE, peer, kPingTag, comm, MPI_STATUS_IGNORE);
        const double t_root = MPI_Wtime();
        MPI_Send(&t_root, 1, MPI_DOUBLE, peer, kPongTag, comm);
      }
    }
  } else {
    double t_root = 0.0;
    MPI_Recv(&t_root, 1, MPI_DOUBLE, 0, kPongTag, comm, MPI_STATUS_IGNORE);  // our turn
    result.round_trip = std::numeric_limits<double>::infinity();
    for (int ping = 0; ping < kPings; ++ping) {
      const double t_send = MPI_Wtime();
      MPI_Send(nullptr, 0, MPI_BYTE, 0, kPingTag, comm);
      MPI_Recv(&t_root, 1, MPI_DOUBLE, 0, kPongTag, comm, MPI_STATUS_IGNORE);
      const double t_recv = MPI_Wtime();
      // t_root was read somewhere in [t_send, t_recv] of our clock; the midpoint is off by at
      // most half the round trip, so the shortest round trip gives the tightest estimate.
      if (t_recv - t_send < result.round_trip) {
        result.round_trip = t_recv - t_send;
        result.offset = 0.5 * (t_send + t_recv) - t_root;
      }
    }
  }
  MPI_Comm_free(&comm);
  return result;
}

double estimate_clock_offset(MPI_Comm world) { return measure_clock_offset(world).offset; }

RunClock::RunClock(MPI_Comm world) {
  const ClockOffset measured = measure_clock_offset(world);
  offset_ = measured.offset;
  round_trip_ = measured.round_trip;
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  epoch_ = rank == 0 ? MPI_Wtime() : 0.0;  // rank 0's offset is 0: its reading is the common clock
  MPI_Bcast(&epoch_, 1, MPI_DOUBLE, 0, world);
}

}  // namespace trident
