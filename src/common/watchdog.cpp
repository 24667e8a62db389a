#include "common/watchdog.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "common/error.hpp"

namespace trident {

namespace {

using Clock = std::chrono::steady_clock;

struct Watch {
  std::mutex mutex;
  std::condition_variable wake;
  std::thread thread;
  bool stopping = false;
  double timeout_s = 0.0;
  int world_rank = 0;
  // The call in progress: depth > 0 while inside at least one BlockedIn.
  int depth = 0;
  const char* operation = nullptr;
  const std::string* group = nullptr;
  double limit_s = 0.0;
  const char* limit_key = nullptr;
  Clock::time_point since;
};

Watch& watch() {
  static Watch instance;
  return instance;
}

// Ends the job from the watchdog thread: MPI_Abort has Open MPI's runtime kill every rank, stopped
// ones included (Open MPI honours it from any thread).
[[noreturn]] void end_job(const Watch& w, double waited) {
  std::fprintf(stderr,
               "trident: world rank %d: watchdog: waited %.0f s in the %s of %s (%s = %g): a rank of that group is "
               "stopped, hung or gone. Aborting the job. Look for that rank's own message or its node's health; "
               "raise %s if such a wait is legitimate\n",
               w.world_rank, waited, w.operation, w.group->c_str(), w.limit_key, w.limit_s, w.limit_key);
  std::fflush(stderr);
  abort_job(kExitPeerLost);
}

void watch_loop() {
  Watch& w = watch();
  std::unique_lock lock(w.mutex);
  while (!w.stopping) {
    const auto poll = std::chrono::duration<double>(std::min(1.0, w.timeout_s / 10.0));
    w.wake.wait_for(lock, poll);
    if (w.stopping || w.depth == 0) continue;
    const double waited = std::chrono::duration<double>(Clock::now() - w.since).count();
    if (waited > w.limit_s) end_job(w, waited);
  }
}

}  // namespace

void abort_job(int exit_code) {
  constexpr auto grace = std::chrono::seconds(30);
  std::thread([exit_code, grace] {
    std::this_thread::sleep_for(grace);
    std::_Exit(exit_code);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

CommWatchdog::CommWatchdog(double timeout_s, int world_rank) {
  Watch& w = watch();
  std::lock_guard lock(w.mutex);
  w.timeout_s = timeout_s;
  w.world_rank = world_rank;
  w.stopping = false;
  w.thread = std::thread(watch_loop);
}

CommWatchdog::~CommWatchdog() {
  Watch& w = watch();
  {
    std::lock_guard lock(w.mutex);
    w.stopping = true;
  }
  w.wake.notify_one();
  w.thread.join();
}

BlockedIn::BlockedIn(const char* operation, const std::string& group)
    : BlockedIn(operation, group, watch().timeout_s, "schedule.timeout_s") {}

BlockedIn::BlockedIn(const char* operation, const std::string& group, double limit_s, const char* limit_key) {
  Watch& w = watch();
  std::lock_guard lock(w.mutex);
  if (w.depth++ > 0) return;
  w.operation = operation;
  w.group = &group;
  w.limit_s = limit_s;
  w.limit_key = limit_key;
  w.since = Clock::now();
}

BlockedIn::~BlockedIn() {
  Watch& w = watch();
  std::lock_guard lock(w.mutex);
  --w.depth;
}

}  // namespace trident
