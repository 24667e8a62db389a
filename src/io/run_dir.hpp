// The run directory (deck key output.dir): what a run leaves behind besides checkpoints.
#pragma once

#include <string>

namespace trident {

inline constexpr const char* kDeckCopyFile = "deck.toml";    // the deck the run used, overrides noted
inline constexpr const char* kTimelineFile = "timeline.h5";  // DESIGN.md "Timeline"

// Creates `dir` (and its parents) if needed; throws InputError naming the path and output.dir when
// it cannot.
void create_run_dir(const std::string& dir);

// Creates `dir` (and its parents) and writes `deck_text` to <dir>/deck.toml atomically (a
// temporary file renamed over it, so a reader never sees half a deck). Throws InputError naming
// the path and output.dir when the directory or the file cannot be written.
void prepare_run_dir(const std::string& dir, const std::string& deck_text);

}  // namespace trident
