// Saving the model at step boundaries in the checkpoint layout of DESIGN.md: every tensor is
// assembled whole across its tp group, sent along the pipeline to world rank 0, and written there. (The collective writer with
// optimizer state, checksums and resume is the HDF5 milestone's.)
#pragma once

#include <iosfwd>
#include <vector>

#include "deck/config.hpp"
#include "grid/process_grid.hpp"
#include "model/param_store.hpp"

namespace trident {

// Collective over the world. Writes <checkpoint dir>/step_XXXXXXXX.h5, points `latest` at it and
// keeps the newest checkpoint.keep files. stage_layouts[s]: the tensors pipeline stage s holds, in
// the order of its store (unallocated stores are enough); `params` is this rank's.
void save_model_checkpoint(const Deck& deck, const ProcessGrid& grid, const ParamStore& params,
                           const std::vector<ParamStore>& stage_layouts, int step, std::ostream& log);

// checkpoint.dir resolved against output.dir when relative.
std::string checkpoint_dir(const Deck& deck);

}  // namespace trident
