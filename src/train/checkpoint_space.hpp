// Disk space for checkpoints at start-up: a warning when the checkpoint directory's file system
// cannot hold the checkpoints a run keeps. (A write that fails names the space itself:
// io/checkpoint_files.hpp check_disk_space.)
#pragma once

#include <iosfwd>
#include <string>

#include "deck/config.hpp"

namespace trident {

// Writes a warning to `log` when the free space plus the checkpoints already in the directory
// cannot hold checkpoint.keep + 1 checkpoints (the kept ones and the one being written).
void warn_if_checkpoints_may_not_fit(const Deck& deck, std::ostream& log);

}  // namespace trident
