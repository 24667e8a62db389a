#include "train/clock_sync.hpp"

#include <limits>

namespace trident {

namespace {

// How long a rank keeps pinging. A round trip of a few µs (shared memory, InfiniBand) or tens of
// µs (TCP) pins the offset to well under the timeline's resolution, so a dozen pings suffice.
// On an oversubscribed or noisy node most pings meet a descheduled process and take a whole
// time slice (ms); pinging on until one gets through, or until pings stop improving, keeps the
// estimate at µs there too, while a slow but steady network still stops after a few dozen.
constexpr int kMinPings = 12;
constexpr double kGoodRoundTrip = 100e-6;  // s: estimate within 50 µs
constexpr int kPingsWithoutImprovement = 64;
constexpr double kBudgetPerRank = 1.0;  // s: bounds start-up on a pathological node
constexpr int kPingTag = 0;
constexpr int kPongTag = 1;

bool keep_pinging(int pings, double best_round_trip, int since_best, double elapsed) {
  if (pings < kMinPings) return true;
  if (best_round_trip <= kGoodRoundTrip) return false;
  return since_best < kPingsWithoutImprovement && elapsed < kBudgetPerRank;
}

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
    // pong), so no rank's round trip includes time spent queueing behind another rank. A ping
    // carries 1 while the rank wants rank 0's time, 0 when it is done.
    for (int peer = 1; peer < size; ++peer) {
      for (int wants_time = 1; wants_time != 0;) {
        const double t_root = MPI_Wtime();
        MPI_Send(&t_root, 1, MPI_DOUBLE, peer, kPongTag, comm);
        MPI_Recv(&wants_time, 1, MPI_INT, peer, kPingTag, comm, MPI_STATUS_IGNORE);
      }
    }
  } else {
    double t_root = 0.0;
    MPI_Recv(&t_root, 1, MPI_DOUBLE, 0, kPongTag, comm, MPI_STATUS_IGNORE);  // our turn
    result.round_trip = std::numeric_limits<double>::infinity();
    const double t_first = MPI_Wtime();
    int pings = 0;
    int since_best = 0;
    for (int wants_time = 1;; ++pings, ++since_best) {
      const double t_send = MPI_Wtime();
      wants_time = keep_pinging(pings, result.round_trip, since_best, t_send - t_first) ? 1 : 0;
      MPI_Send(&wants_time, 1, MPI_INT, 0, kPingTag, comm);
      if (wants_time == 0) break;
      MPI_Recv(&t_root, 1, MPI_DOUBLE, 0, kPongTag, comm, MPI_STATUS_IGNORE);
      const double t_recv = MPI_Wtime();
      // t_root was read somewhere in [t_send, t_recv] of our clock; the midpoint is off by at
      // most half the round trip, so the shortest round trip gives the tightest estimate.
      if (t_recv - t_send < result.round_trip) {
        result.round_trip = t_recv - t_send;
        result.offset = 0.5 * (t_send + t_recv) - t_root;
        since_best = 0;
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
