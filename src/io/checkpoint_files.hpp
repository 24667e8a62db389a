// The checkpoint directory on disk (DESIGN.md "Checkpoint"): file names, the commit protocol that
// makes a checkpoint complete or absent, and the order in which resume tries them. Pure
// filesystem, no MPI and no HDF5: the collective writer calls commit_checkpoint on one rank.
#pragma once

#include <string>
#include <vector>

namespace trident {

inline constexpr const char* kLatestFile = "latest";  // holds the file name of the newest complete checkpoint
inline constexpr const char* kTmpSuffix = ".tmp";     // files being written; never read

std::string checkpoint_file_name(int step);  // "step_00000005.h5"

// Makes the closed file `tmp_path` (= <dir>/step_XXXXXXXX.h5.tmp) the checkpoint `final_path`
// (= <dir>/step_XXXXXXXX.h5): renames it, rewrites <dir>/latest atomically (latest.tmp, fsync,
// rename) and syncs the directory, so a crash leaves either the old or the new state. Then deletes
// all but the first `keep` (at least 1) of checkpoint_candidates(dir) — the new file comes first,
// so it is never deleted — and every stale *.tmp in `dir` (left by writes that died).
// Throws std::runtime_error naming the path that failed.
void commit_checkpoint(const std::string& tmp_path, const std::string& final_path, int keep);

// Newest first: the complete checkpoints in `dir` (step_XXXXXXXX.h5 files; no *.tmp), as paths.
// The file `latest` names comes first when it exists and is listed, then the others by descending
// step. Empty when `dir` does not exist.
std::vector<std::string> checkpoint_candidates(const std::string& dir);

}  // namespace trident
