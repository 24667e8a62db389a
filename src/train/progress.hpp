// Rank 0's console output during training: one line per logged step, with rates and an ETA.
#pragma once

#include <iosfwd>

#include "io/timeline_writer.hpp"

namespace trident {

class ProgressPrinter {
 public:
  // show_bubble: add the step's measured pipeline bubble (runs with more than one stage).
  // first_step: the step the run resumed after (0 for a fresh run), for the ETA.
  ProgressPrinter(std::ostream& out, int first_step, int total_steps, int log_every, bool show_bubble = false);
  // Prints the line for this step when it is due (every log_every steps, the first and the last).
  void step(const StepRecord& record);

 private:
  std::ostream& out_;
  int first_step_;
  int total_steps_;
  int log_every_;
  bool show_bubble_;
  double elapsed_s_ = 0.0;
};

}  // namespace trident
