// When and how the trainer's checkpoints are saved: synchronously, or under checkpoint.async with
// the data written in the background (at most one write in flight); and what a save that fails
// does under checkpoint.on_failure. Collective over the world, called between steps only.
#pragma once

#include <mpi.h>

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "deck/config.hpp"
#include "grid/process_grid.hpp"
#include "train/checkpoint.hpp"
#include "train/event_log.hpp"

namespace trident {

// The training state a save writes.
struct SavedState {
  const ParamStore& params;
  Optimizer& optimizer;
  int step;
  DataPosition data;
};

// Checkpoint events of this rank (CKPT_WRITE, CKPT_BLOCKED), for the timeline under `step`.
struct SaveEvents {
  int step;
  EventLog events;
};

class CheckpointSaver {
 public:
  // `deck` and `grid` must outlive the saver; `world_group` names the world for the watchdog;
  // `run_clock` reads the run's clock (the events' times).
  CheckpointSaver(const Deck& deck, const ProcessGrid& grid, const std::string& world_group, std::ostream& log,
                  std::function<double()> run_clock);
  ~CheckpointSaver();

  // Saves `state` unless this step was saved already; returns whether it was saved (or its
  // background write started). A background write still in flight completes first (the log says
  // that the save waits for it). The save is synchronous without checkpoint.async, when
  // `last_chance` (the final step, a stop signal: it must be on disk before the run exits) and when
  // the file is to be read next (`read_next`). A failed save ends the run (CollectiveFailure)
  // under on_failure = "abort" or when `last_chance`; otherwise it is logged and false returned.
  bool save(const SavedState& state, bool last_chance, bool read_next = false);

  // After step `step`: agrees on `stop_signal` over the world (the largest) in the same all-reduce
  // that asks whether every rank's part of the background write is on disk, and then commits it.
  // Returns the signal.
  int poll(int step, int stop_signal);

  int saved_step() const { return saved_step_; }

  // checkpoint.async: allocates the host copy for `params` now (zeroed, so its pages are the
  // process's), so that the first save does not pay for it while training waits.
  void reserve(const ParamStore& params);

  // The events of the saves since the last call (the same on every rank), each under its step: a
  // save's write and its first stop under the save's step, the stop of a background save's wait and
  // commit under the step after which training stopped for it.
  std::vector<SaveEvents> take_events() { return std::exchange(completed_, {}); }

 private:
  void complete_background_save(int step);
  bool failed(int step, bool last_chance, const CheckpointWriteError& error);

  const Deck& deck_;
  const ProcessGrid& grid_;
  const std::string& world_group_;
  std::ostream& log_;
  std::function<double()> run_clock_;
  std::unique_ptr<BackgroundSave> in_flight_;
  SaveBuffers buffers_;  // between background saves
  double in_flight_copy_start_ = 0.0, in_flight_copy_end_ = 0.0;  // its CKPT_BLOCKED at the start
  double steady_to_run_clock_ = 0.0;                              // its thread's times onto the run's clock
  std::vector<SaveEvents> completed_;
  int saved_step_ = -1;  // of the last checkpoint this run wrote or started
};

}  // namespace trident
