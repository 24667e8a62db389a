// Checkpoints of the training state in the layout of DESIGN.md "Checkpoint": one HDF5 file written
// collectively, each rank writing the boxes of its TP shards of the tensors its pipeline stage
// holds (the dp = 0 replica only: the others hold the same values), whole HF-shaped tensors under
// /model and the AdamW moments under /optimizer/m and /optimizer/v. Any grid reads any grid's
// checkpoint: every rank reads the boxes its own shards need, and the dataset checksums are
// verified over what the ranks read together.
#pragma once

#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "deck/config.hpp"
#include "grid/process_grid.hpp"
#include "model/param_store.hpp"
#include "optim/optimizer.hpp"

namespace trident {

// The token stream a run reads, as far as its position depends on it (data/window_order.hpp):
// sequence g reads a window fixed by g, the window count and the shuffle seed. A checkpoint
// records them with the sequences consumed and the epoch; a run resumed on other data is warned
// that it does not continue the interrupted run's windows.
struct DataPosition {
  std::int64_t windows = 0;
  bool shuffled = false;
};

// A checkpoint that could not be written (full disk, quota, I/O error, permission), thrown by every
// rank alike once the partial file is removed, naming the OS's reason, the size and the free space.
struct CheckpointWriteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Collective over the world. Writes and commits <checkpoint dir>/step_XXXXXXXX.h5 (temporary
// name, rename, `latest`) and keeps the newest checkpoint.keep files; CheckpointWriteError when
// that fails, with `latest` and the previous checkpoints untouched. Returns the bytes of data this
// rank wrote.
std::int64_t save_checkpoint(const Deck& deck, const ProcessGrid& grid, const ParamStore& params,
                             Optimizer& optimizer, int step, const DataPosition& data, std::ostream& log);

// Whether this rank writes any element of a checkpoint (each element is written by one rank: the
// first replica's, tp rank 0's of a tensor every TP rank holds whole, the first stage's tied wte).
bool writes_checkpoint_data(const ProcessGrid& grid, const ParamStore& params);

// The host memory a background save copies this rank's parameters and AdamW moments into; handed
// from one save to the next, so that only the first pays for the allocation and its page faults.
struct SaveBuffers {
  HostFloatBuffer values, m, v;
};

// checkpoint.async: a save whose data a background thread writes while training goes on
// (io/staged_checkpoint.hpp). The file and its commit are save_checkpoint's.
class BackgroundSave {
 public:
  // Collective over the world: copies this rank's parameters and AdamW moments into `buffers`
  // (reallocated where their sizes differ), creates the file and starts the thread, at a lower
  // scheduling priority than training. CheckpointWriteError when the file cannot be created.
  BackgroundSave(const Deck& deck, const ProcessGrid& grid, const ParamStore& params, Optimizer& optimizer, int step,
                 const DataPosition& data, SaveBuffers buffers);
  ~BackgroundSave();  // waits for the thread: a save that was not committed stays a *.tmp file
  BackgroundSave(const BackgroundSave&) = delete;
  BackgroundSave& operator=(const BackgroundSave&) = delete;

  int step() const { return step_; }
  std::int64_t bytes_copied() const { return bytes_copied_; }  // to host memory: none where the rank writes nothing
  bool written_here() const { return written_here_.load(); }  // this rank's thread is over
  // When the copies and the file's creation were done, just before the thread started
  // (steady_seconds(), the thread's clock: so the write starts no earlier on any conversion).
  double copied_s() const { return copied_s_; }
  // After commit: this rank's bytes of data and when its thread wrote them (steady_seconds()).
  std::int64_t bytes_written() const;
  double write_start_s() const { return write_start_s_; }
  double write_end_s() const { return write_end_s_; }
  // Collective over the world: waits for this rank's thread, then commits the file; rank 0 logs
  // it with the seconds training was blocked by the save. CheckpointWriteError as save_checkpoint.
  void commit(std::ostream& log);
  // After commit (or a failed one): the buffers, for the next save.
  SaveBuffers release_buffers();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int step_;
  std::int64_t bytes_copied_ = 0;
  double blocked_s_ = 0.0;  // the copies and the file's creation; then waiting and committing
  double started_;          // MPI_Wtime
  double copied_s_ = 0.0;
  double write_start_s_ = 0.0, write_end_s_ = 0.0;  // set by the thread
  std::atomic<bool> written_here_{false};
  std::thread writer_;
};

// Collective over the world. Loads the checkpoint that checkpoint.resume names into params and
// the optimizer and returns its step; 0 when there is nothing to resume ("none", or "auto" with
// no checkpoint yet), having then loaded checkpoint.init's weights where it names some (a trident
// checkpoint's model, or "hf:DIR"; the moments stay zero; InputError when they cannot be read). "auto" trusts `latest` and falls back to older complete checkpoints with a
// warning naming the problem (checksum, shape, missing dataset, unreadable file); throws
// InputError when checkpoints exist but none is valid, or when an explicit path fails to load.
int resume_from_checkpoint(const Deck& deck, const ProcessGrid& grid, ParamStore& params, Optimizer& optimizer,
                           const DataPosition& data, std::ostream& log);

// An upper bound of one checkpoint file's size (io/checkpoint_files.hpp checkpoint_file_bound).
std::int64_t checkpoint_bytes(const Deck& deck);

// checkpoint.dir resolved against output.dir when relative.
std::string checkpoint_dir(const Deck& deck);

}  // namespace trident
