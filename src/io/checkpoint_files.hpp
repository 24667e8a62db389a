// The checkpoint directory on disk (DESIGN.md "Checkpoint"): file names, the commit protocol that
// makes a checkpoint complete or absent, and the order in which resume tries them. Pure
// filesystem, no MPI and no HDF5: the collective writer calls commit_checkpoint on one rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trident {

inline constexpr const char* kLatestFile = "latest";  // holds the file name of the newest complete checkpoint
inline constexpr const char* kTmpSuffix = ".tmp";     // files being written; never read

std::string checkpoint_file_name(int step);  // "step_00000005.h5"

// An upper bound of a checkpoint file's size: `data_bytes` in `datasets` datasets, HDF5's headers
// (2 KiB per dataset with its checksum attribute, 16 KiB for the superblock and root group) and
// `attribute_bytes` of root attributes.
std::int64_t checkpoint_file_bound(std::int64_t data_bytes, std::int64_t datasets, std::int64_t attribute_bytes);

// Makes sure that `path` can be given `bytes` of disk now, before any collective write starts: a
// write that fails half-way leaves parallel HDF5 unable to close the file on every rank alike.
// Reserves the space (fallocate, so quotas count too) and removes the file again; where the file
// system cannot reserve, compares with its free space (statvfs). Throws std::runtime_error with
// the OS's reason (no space, quota, permission, read-only, I/O error), the size and the free space.
void check_disk_space(const std::string& path, std::int64_t bytes);

// Bytes free for an unprivileged user on the file system holding `dir` (statvfs); -1 when it
// cannot tell.
std::int64_t free_disk_bytes(const std::string& dir);

// "1.6 MiB needed, 0.8 MiB free in <dir>": for messages about a write that failed.
std::string disk_space_note(const std::string& dir, std::int64_t bytes);

// Makes the closed file `tmp_path` (= <dir>/step_XXXXXXXX.h5.tmp) the checkpoint `final_path`
// (= <dir>/step_XXXXXXXX.h5): renames it, rewrites <dir>/latest atomically (latest.tmp, fsync,
// rename) and syncs the directory, so a crash leaves either the old or the new state. Then deletes
// all but the first `keep` (at least 1) of checkpoint_candidates(dir) — the new file comes first,
// so it is never deleted — and every stale *.tmp in `dir` (left by writes that died).
// Throws std::runtime_error naming the path that failed and the OS's reason; when `latest` cannot
// be rewritten (a full disk), the renamed file is removed again: the directory is as before.
void commit_checkpoint(const std::string& tmp_path, const std::string& final_path, int keep);

// Newest first: the complete checkpoints in `dir` (step_XXXXXXXX.h5 files; no *.tmp), as paths.
// The file `latest` names comes first when it exists and is listed, then the others by descending
// step. Empty when `dir` does not exist.
std::vector<std::string> checkpoint_candidates(const std::string& dir);

}  // namespace trident
