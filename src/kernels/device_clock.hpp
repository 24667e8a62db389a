// Timestamps of the device's work for the timeline, taken without the host waiting for the device
// (an action's event still spans its kernels). mark() returns a time for this point of the work
// queued so far. The CPU build runs a kernel as it is launched, so a mark is the host clock's
// reading. The GPU build records an event on the compute stream and returns the host clock's
// reading as a provisional time; settle(), after the step's one wait for the device, turns each
// provisional time into its event's: the host reading of the first mark since the last settle
// (taken while the device was idle, between steps) plus the device time elapsed from it.
#pragma once

#include <functional>
#include <utility>
#include <vector>

namespace trident {

class DeviceClock {
 public:
  // host_seconds: the clock the times are on (the run's RunClock).
  explicit DeviceClock(std::function<double()> host_seconds);
  ~DeviceClock();
  DeviceClock(const DeviceClock&) = delete;
  DeviceClock& operator=(const DeviceClock&) = delete;

  double mark();
  // Maps the marks since the last settle to their device times, then starts afresh: afterwards
  // settled(t) gives the device time of a provisional t, and any other t unchanged. Waits for the
  // last mark's work (done already after the step's read of its figures).
  void settle();
  double settled(double time) const;

 private:
  std::function<double()> host_seconds_;
  std::vector<std::pair<double, double>> settled_;  // (provisional, device) of the last settle, by provisional
  struct Events;  // the GPU build's pool of CUDA events and their provisional times
  Events* events_ = nullptr;
};

}  // namespace trident
