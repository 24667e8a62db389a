// <output.dir>/timeline.h5 (DESIGN.md "Timeline"): root attributes describing the run, the /steps
// table (one 1-D dataset per StepRecord field, so that f["steps"]["loss"] reads losses) and the
// /events table (one 1-D dataset per EventRow field, so that f["events"]["kind"] reads the kinds).
// Written by rank 0 alone.
//
// /steps/peak_activation_bytes_per_stage is the one 2-D /steps dataset: [steps, stages], so that
// f["steps"]["peak_activation_bytes_per_stage"][:, s] reads stage s's peaks.
//
// Resume: a run restarted from a checkpoint of step S opens the timeline of the run it continues,
// drops the /steps and /events rows of steps after S (the crashed run got further than its last
// checkpoint) and appends from there; see the resume constructor.
//
// Crash safety: the file is only changed right before an H5Fflush, never left with unflushed
// HDF5 state between calls. So a run that dies keeps a readable file holding every step appended
// so far and every event written by the last flush() (or automatic batch write, see below).
// Events appended after that are lost with the process, which is the price of not flushing them
// every step.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/timeline_event.hpp"
#include "io/hdf5_attributes.hpp"
#include "io/hdf5_columns.hpp"
#include "io/hdf5_handle.hpp"

namespace trident {

struct StepRecord {
  std::int64_t step = 0;
  double loss = 0;             // mean cross-entropy of the step's global batch, before its update
  double val_loss = std::numeric_limits<double>::quiet_NaN();  // [eval]'s loss after the update; NaN: none
  double lr = 0;
  double grad_norm = 0;        // global norm before clipping
  double aux_loss = 0;         // [model.moe]'s load-balancing loss, added to `loss` in the objective (0: dense)
  double expert_load = 0;      // [model.moe]: the busiest expert's tokens over the mean, worst layer (0: dense)
  double step_time_s = 0;
  double tokens_per_s = 0;
  double bubble = 0;           // pipeline idle fraction of the step (0 on one rank)
  double achieved_gflops = 0;
  double mfu = 0;              // achieved / measured GEMM peak
  double dp_exposed_s = 0;     // data-parallel communication not hidden behind backward, the largest of all ranks'
  double tp_comm_s = 0;        // time blocked in tensor-parallel collectives, the largest of all ranks'
  double cp_comm_s = 0;        // time blocked in ring attention's context-parallel hops, the largest of all ranks'
  double ep_comm_s = 0;        // time blocked in the mixture's expert-parallel all-to-alls, the largest of all ranks'
  double timeline_s = 0;       // gathering and writing this step's /events (the recording overhead)
  std::int64_t peak_activation_bytes = 0;  // the largest of all ranks'
  std::int64_t peak_rss_bytes = 0;         // resident set high-water mark so far, the largest of all ranks'
  // Per pipeline stage (index = pp coordinate), the largest peak of the stage's ranks: empty (the
  // row then holds -1, "not recorded") or exactly TimelineWriter::stages() values.
  std::vector<std::int64_t> peak_activation_bytes_per_stage;
};

// One /events row: an event and who recorded it when. The /events datasets are rank, tp, pp, dp,
// step (int32), kind (24-byte null-padded ASCII string, event_kind_name), microbatch, chunk
// (int32), t_start, t_end (float64 seconds on the run's common clock) and bytes (int64).
struct EventRow {
  std::int32_t rank = 0;  // world rank
  std::int32_t tp = 0;    // the rank's coordinates in the process grid
  std::int32_t cp = 0;
  std::int32_t pp = 0;
  std::int32_t dp = 0;
  std::int32_t step = 0;
  TimelineEvent event;
};

class TimelineWriter {
 public:
  // Width of the fixed-length /events/kind strings (the longest name, ALLREDUCE_EMB, has 13).
  static constexpr std::size_t kKindBytes = 24;
  // Pending events written without waiting for flush() once this many have accumulated: bounds
  // the memory held between checkpoints (about 4 MiB) while keeping writes large.
  static constexpr std::size_t kMaxPendingEvents = std::size_t{1} << 16;

  // Creates (truncating) `path` with the root attributes and empty /steps and /events tables;
  // /steps/peak_activation_bytes_per_stage has `stages` (>= 1) values per row.
  TimelineWriter(const std::string& path, const Attributes& root_attributes, int stages = 1);

  // Where a resumed run continues: the last step whose rows are kept (the checkpoint's step).
  struct Resume {
    std::int64_t after_step = 0;
  };
  // Continues the timeline at `path` (read-write): deletes the /steps and /events rows whose
  // `step` is greater than resume.after_step (wherever they are; normally the last ones), replaces
  // every root attribute by `root_attributes` (the deck may have changed) and flushes; appending
  // then goes on as after creation. Falls back to creating a fresh timeline, as the first
  // constructor does, when `path` does not exist, is not an HDF5 file or has no /steps group
  // (not a timeline), or holds a timeline of another layout (a missing or differently typed
  // column, another number of stages): that file is first renamed to `path` + ".old". resumed()
  // and note() say which happened.
  TimelineWriter(const std::string& path, const Attributes& root_attributes, int stages, Resume resume);
  // The same, as a factory.
  static TimelineWriter resume(const std::string& path, const Attributes& root_attributes, std::int64_t after_step,
                               int stages = 1) {
    return TimelineWriter(path, root_attributes, stages, Resume{after_step});
  }

  // Writes the pending events (best effort: a destructor cannot report a failure).
  ~TimelineWriter();
  TimelineWriter(const TimelineWriter&) = delete;
  TimelineWriter& operator=(const TimelineWriter&) = delete;

  // Adds one row to every /steps dataset and flushes the file. Throws std::invalid_argument, before
  // writing anything, when record.peak_activation_bytes_per_stage is neither empty nor stages()
  // long.
  void append_step(const StepRecord& record);

  // Queues `rows` for /events: costs a copy into memory, no HDF5 call, unless the queue reaches
  // kMaxPendingEvents, when it is written out and flushed like flush() does.
  void append_events(const std::vector<EventRow>& rows);

  // Writes the queued events (one extent change and one write per /events dataset) and flushes
  // the file. The trainer calls it at checkpoints and at the end of the run.
  void flush();

  // Sets (adds or replaces) one root attribute, e.g. the schedule a re-planning switched to.
  void set_attribute(const std::string& name, const AttributeValue& value);

  std::int64_t steps_written() const { return step_columns_.front().rows(); }
  // Events in the file so far; events_pending() more are queued for the next write.
  std::int64_t events_written() const { return event_columns_.front().rows(); }
  std::int64_t events_pending() const { return static_cast<std::int64_t>(pending_events_.size()); }
  int stages() const { return stages_; }

  // True when the resume constructor continued an existing timeline; false after creation.
  bool resumed() const { return resumed_; }
  // One line for the run's log about the resume constructor's outcome: what it kept and dropped,
  // or why it created a fresh timeline instead. Empty after the first constructor.
  const std::string& note() const { return note_; }

 private:
  void create(const Attributes& root_attributes);
  // Why the resume constructor creates a fresh timeline instead of continuing the file.
  struct Fallback {
    std::string reason;
    bool keep_old_file = false;  // a timeline of another layout: renamed, not overwritten
  };
  // Continues the existing timeline for the resume constructor; when it cannot be continued,
  // closes every handle again and says why.
  std::optional<Fallback> open_existing(std::int64_t after_step, const Attributes& root_attributes);
  void close_all();
  void write_pending_events();
  void flush_file(const std::string& after);

  std::string path_;
  int stages_ = 1;
  bool resumed_ = false;
  std::string note_;
  Hdf5Handle file_;   // declared before the objects inside it: closed after them
  Hdf5Handle steps_;
  Hdf5Handle events_;
  Hdf5Handle kind_type_;  // the fixed-length string type of /events/kind
  // In the order of the StepRecord fields (kStepFields, timeline_writer.cpp), then
  // peak_activation_bytes_per_stage.
  std::vector<Hdf5Column> step_columns_;
  std::vector<Hdf5Column> event_columns_;  // in the order of kEventFields (timeline_writer.cpp)
  std::vector<EventRow> pending_events_;
};

}  // namespace trident
