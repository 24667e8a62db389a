// The training run of one rank: set up (checks, data, model, optimizer, run directory), then the
// step loop. Construction does everything that can fail on bad input, before any compute.
#pragma once

#include <mpi.h>

#include <iosfwd>
#include <memory>

#include "deck/config.hpp"

namespace trident {

class Trainer {
 public:
  // Throws InputError for a deck/world mismatch or bad data, before any training step.
  Trainer(const Deck& deck, MPI_Comm world, std::ostream& log);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Runs deck.train.steps steps; rank 0 prints progress to `log` and records /steps.
  void run();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace trident
