// The training run of one rank: set up (checks, data, model, optimizer, run directory), then the
// step loop. Construction does everything that can fail on bad input, before any compute.
#pragma once

#include <mpi.h>

#include <iosfwd>
#include <memory>
#include <string>

#include "common/watchdog.hpp"
#include "deck/config.hpp"
#include "io/run_dir_lock.hpp"

namespace trident {

class Trainer {
 public:
  // Throws InputError for a deck/world mismatch or bad data, before any training step.
  // mpi_summary: the MPI library and its settings, for the start-up banner (comm/mpi_tuning.hpp).
  Trainer(const Deck& deck, MPI_Comm world, std::ostream& log, const std::string& mpi_summary = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Runs the steps after the resumed one up to deck.train.steps; rank 0 prints progress to `log`
  // and records the timeline. Returns kExitOk, or kExitCheckpointed when SIGUSR1 / SIGTERM stopped
  // the run at a step boundary after a checkpoint (common/error.hpp).
  int run();

 private:
  struct State;
  std::unique_ptr<CommWatchdog> watchdog_;    // watches every blocking call, set-up and clean-up included
  std::unique_ptr<RunDirLock> run_dir_lock_;  // world rank 0; released after the State is gone
  std::unique_ptr<State> state_;
};

}  // namespace trident
