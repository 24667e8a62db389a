// The communication watchdog (DESIGN.md "Schedules are data", the executor's paragraph): a thread that ends the whole job when this
// rank has been blocked in one communication call for longer than the limit (schedule.timeout_s),
// after printing which call, in which group, and for how long. A rank stopped, hung or dead
// anywhere leaves its peers waiting in some collective or message: they report it and the job ends
// within the limit instead of hanging until the batch system's wall time.
//
// The calls that block mark themselves with a BlockedIn scope: MpiComm's collectives and waits,
// and the trainer's own collectives between steps. Only the outermost scope counts. Waits that poll
// (the pipeline executor's receives) keep their own watchdog with the message's details.
#pragma once

#include <string>

namespace trident {

// The thread, for the lifetime of this object (one at a time per process). `world_rank` names this
// rank in the report.
class CommWatchdog {
 public:
  CommWatchdog(double timeout_s, int world_rank);
  ~CommWatchdog();
  CommWatchdog(const CommWatchdog&) = delete;
  CommWatchdog& operator=(const CommWatchdog&) = delete;
};

// Ends every rank of the job with `exit_code` (MPI_Abort). Where the runtime cannot reach another
// node (its link is down) MPI_Abort may wait for it: this process exits after a grace period
// regardless, so that no rank stays behind.
[[noreturn]] void abort_job(int exit_code);

// The calling thread is blocked in `operation` (a literal, e.g. "all-reduce") of `group` (e.g.
// "the dp group (world ranks 0, 2)"; must outlive the scope) from construction to destruction.
// The limit is the watchdog's (schedule.timeout_s) unless given with the deck key that sets it.
class BlockedIn {
 public:
  BlockedIn(const char* operation, const std::string& group);
  BlockedIn(const char* operation, const std::string& group, double limit_s, const char* limit_key);
  ~BlockedIn();
  BlockedIn(const BlockedIn&) = delete;
  BlockedIn& operator=(const BlockedIn&) = delete;
};

}  // namespace trident
