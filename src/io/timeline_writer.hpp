// <output.dir>/timeline.h5 (DESIGN.md "Timeline"): root attributes describing the run and the
// /steps table, one 1-D dataset per StepRecord field, so that f["steps"]["loss"] reads losses.
// Written by rank 0 alone and flushed after every step, so a crash keeps the finished steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/hdf5_attributes.hpp"
#include "io/hdf5_columns.hpp"
#include "io/hdf5_handle.hpp"

namespace trident {

struct StepRecord {
  std::int64_t step = 0;
  double loss = 0;             // mean cross-entropy of the step's global batch, before its update
  double lr = 0;
  double grad_norm = 0;        // global norm before clipping
  double step_time_s = 0;
  double tokens_per_s = 0;
  double bubble = 0;           // pipeline idle fraction of the step (0 on one rank)
  double achieved_gflops = 0;
  double mfu = 0;              // achieved / measured GEMM peak
  double dp_exposed_s = 0;     // data-parallel communication not hidden behind backward
  std::int64_t peak_activation_bytes = 0;
};

class TimelineWriter {
 public:
  // Creates (truncating) `path` with the root attributes and an empty /steps table.
  TimelineWriter(const std::string& path, const Attributes& root_attributes);
  ~TimelineWriter();
  TimelineWriter(const TimelineWriter&) = delete;
  TimelineWriter& operator=(const TimelineWriter&) = delete;

  // Adds one row to every /steps dataset and flushes the file.
  void append_step(const StepRecord& record);

  std::int64_t steps_written() const { return columns_.front().rows(); }

 private:
  std::string path_;
  Hdf5Handle file_;   // declared first: closed last, after the objects inside it
  Hdf5Handle steps_;
  std::vector<Hdf5Column> columns_;  // in the order of the StepRecord fields
};

}  // namespace trident
