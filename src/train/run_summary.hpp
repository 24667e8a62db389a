// What a run tells about itself before it trains: the start-up banner rank 0 prints, and the
// attributes at the root of timeline.h5 (DESIGN.md "Timeline file") that trident-post reads. Both
// are built from one RunSummary, so they cannot disagree.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "data/batch_windows.hpp"
#include "deck/config.hpp"
#include "io/hdf5_attributes.hpp"
#include "kernels/gemm.hpp"
#include "plan/partition.hpp"
#include "schedule/schedule.hpp"

namespace trident {

struct RunSummary {
  const Deck& deck;
  const Schedule& schedule;                   // as run (what auto chose)
  const std::vector<StageLayers>& partition;  // layers of every virtual stage
  double predicted_bubble = 0.0;              // the simulator's, for the deck's costs
  BlasInfo blas;
  std::string rank_layout;  // grid/process_grid.hpp's describe_rank_layout
  std::string data;         // "<windows> windows of data (<source>)"
  std::string eval;         // train/evaluator.hpp's describe(); empty without [eval]
  std::string mpi;          // the MPI library and its settings (may be empty)
  double flops_per_step = 0.0;
  double gemm_peak_gflops = 0.0;  // known after the measurement; the banner's head does not use it
};

// The banner's lines from "trident <version>: <deck>" to the MPI line.
void print_banner_head(std::ostream& out, const RunSummary& run);
// The line that completes "  measuring sgemm peak ...", and the output directory.
void print_banner_tail(std::ostream& out, const RunSummary& run);

Attributes timeline_attributes(const RunSummary& run);

// RunSummary::data: "<windows> [shuffled] windows of data (<source>)[, documents packed: ...]".
std::string describe_data(const DataConfig& data, const BatchWindows& windows);

}  // namespace trident
