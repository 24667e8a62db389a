#include "train/checkpoint_saver.hpp"

#include <ostream>
#include <utility>

#include "comm/timed_comm.hpp"
#include "common/error.hpp"
#include "common/watchdog.hpp"

namespace trident {

namespace {

TimelineEvent save_event(EventKind kind, double start, double end, std::int64_t bytes = 0) {
  TimelineEvent event;
  event.kind = kind;
  event.t_start = start;
  event.t_end = end;
  event.bytes = bytes;
  return event;
}

}  // namespace

CheckpointSaver::CheckpointSaver(const Deck& deck, const ProcessGrid& grid, const std::string& world_group,
                                 std::ostream& log, std::function<double()> run_clock)
    : deck_(deck), grid_(grid), world_group_(world_group), log_(log), run_clock_(std::move(run_clock)) {}

CheckpointSaver::~CheckpointSaver() = default;

bool CheckpointSaver::save(const SavedState& state, bool last_chance, bool read_next) {
  const bool in_background = deck_.checkpoint.async && !last_chance && !read_next;
  if (in_flight_ && (!in_background || state.step != saved_step_)) {
    if (grid_.world_rank == 0)
      log_ << "  checkpoint of step " << state.step << " waits for the background write of step "
           << in_flight_->step() << "\n"
           << std::flush;
    complete_background_save(state.step);
  }
  if (state.step == saved_step_) return true;
  try {
    const BlockedIn watched("write of the checkpoint", world_group_, deck_.checkpoint.timeout_s,
                            "checkpoint.timeout_s");
    const double start = run_clock_();
    if (in_background) {
      steady_to_run_clock_ = start - steady_seconds();
      in_flight_ = std::make_unique<BackgroundSave>(deck_, grid_, state.params, state.optimizer, state.step,
                                                    state.data, std::move(buffers_));
      in_flight_copy_start_ = start;
      in_flight_copy_end_ = in_flight_->copied_s() + steady_to_run_clock_;
    } else {
      const std::int64_t bytes =
          save_checkpoint(deck_, grid_, state.params, state.optimizer, state.step, state.data, log_);
      const double end = run_clock_();
      SaveEvents& saved = completed_.emplace_back(SaveEvents{state.step, {}});
      saved.events.record(save_event(EventKind::checkpoint_blocked, start, end, bytes));
    }
    saved_step_ = state.step;
    return true;
  } catch (const CheckpointWriteError& error) {
    return failed(state.step, last_chance, error);
  }
}

void CheckpointSaver::reserve(const ParamStore& params) {
  if (!deck_.checkpoint.async || !writes_checkpoint_data(grid_, params)) return;
  const std::size_t n = params.values.extent(0);
  buffers_ = {HostFloatBuffer("checkpoint copy", n), HostFloatBuffer("checkpoint copy", n),
              HostFloatBuffer("checkpoint copy", n)};
}

int CheckpointSaver::poll(int step, int stop_signal) {
  int flags[2] = {stop_signal, in_flight_ && !in_flight_->written_here() ? 1 : 0};
  {
    const BlockedIn watched("all-reduce of the stop signals", world_group_);
    MPI_Allreduce(MPI_IN_PLACE, flags, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  }
  if (in_flight_ && flags[1] == 0) complete_background_save(step);
  return flags[0];
}

void CheckpointSaver::complete_background_save(int step) {
  const std::unique_ptr<BackgroundSave> save = std::move(in_flight_);
  struct KeepBuffers {
    BackgroundSave& save;
    SaveBuffers& into;
    ~KeepBuffers() { into = save.release_buffers(); }
  } keep{*save, buffers_};
  try {
    const BlockedIn watched("commit of the background checkpoint write", world_group_, deck_.checkpoint.timeout_s,
                            "checkpoint.timeout_s");
    const double start = run_clock_();
    save->commit(log_);
    SaveEvents& saved = completed_.emplace_back(SaveEvents{save->step(), {}});
    saved.events.record(
        save_event(EventKind::checkpoint_blocked, in_flight_copy_start_, in_flight_copy_end_, save->bytes_copied()));
    saved.events.record(save_event(EventKind::checkpoint_write, save->write_start_s() + steady_to_run_clock_,
                                   save->write_end_s() + steady_to_run_clock_, save->bytes_written()));
    completed_.emplace_back(SaveEvents{step, {}})
        .events.record(save_event(EventKind::checkpoint_blocked, start, run_clock_()));
  } catch (const CheckpointWriteError& error) {
    if (saved_step_ == save->step()) saved_step_ = -1;
    failed(save->step(), false, error);
  }
}

// A checkpoint that could not be written (every rank threw the same error; the partial file is
// gone, `latest` and the older checkpoints untouched) ends the run under on_failure = "abort", and
// always when it is the last chance to save the training (the final step, a stop signal).
bool CheckpointSaver::failed(int step, bool last_chance, const CheckpointWriteError& error) {
  const std::string what = "checkpoint of step " + std::to_string(step) + " not written: " + error.what();
  if (last_chance || deck_.checkpoint.on_failure == CheckpointFailure::abort)
    throw CollectiveFailure(what + "; see the reason: free space there, or set checkpoint.dir to another file system" +
                            (last_chance ? "" : " (checkpoint.on_failure = \"continue\" trains on without it)"));
  if (grid_.world_rank == 0)
    log_ << "  warning: " << what << "; training goes on (checkpoint.on_failure = \"continue\") and tries again at "
         << "the next checkpoint\n"
         << std::flush;
  return false;
}

}  // namespace trident
