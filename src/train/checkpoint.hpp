// Checkpoints of the training state in the layout of DESIGN.md "Checkpoint": one HDF5 file written
// collectively, each rank writing the boxes of its TP shards of the tensors its pipeline stage
// holds (the dp = 0 replica only: the others hold the same values), whole HF-shaped tensors under
// /model and the AdamW moments under /optimizer/m and /optimizer/v. Any grid reads any grid's
// checkpoint: every rank reads the boxes its own shards need, and the dataset checksums are
// verified over what the ranks read together.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <stdexcept>
#include <string>

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
// that fails, with `latest` and the previous checkpoints untouched.
void save_checkpoint(const Deck& deck, const ProcessGrid& grid, const ParamStore& params, Optimizer& optimizer,
                     int step, const DataPosition& data, std::ostream& log);

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
