// One live run per run directory. Two runs writing one timeline.h5 or one checkpoint directory
// would corrupt both (HDF5 would refuse the second only once it opens the timeline, with "unable
// to lock file, errno = 11"); so world rank 0 takes <output.dir>/.trident.lock as the Trainer
// starts, before the run writes or reads anything there (DESIGN.md "Timeline"), holding the
// host, process id and start time of the run that owns the directory.
#pragma once

#include <iosfwd>
#include <string>

namespace trident {

inline constexpr const char* kRunDirLockFile = ".trident.lock";

class RunDirLock {
 public:
  // Creates `dir` if needed and takes its lock. A lock held by a live process is an InputError
  // naming that run (host, pid, start) and the way out. A lock whose process is gone (same host,
  // and no process with that pid and start time) was left by a killed run: it is taken over, with
  // a line on `log`. A lock from another host cannot be checked and counts as live.
  RunDirLock(const std::string& dir, std::ostream& log);
  ~RunDirLock();  // removes the lock, and the directory if this lock created it and it is empty
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  std::string dir_, path_;
  bool created_dir_ = false;  // a run that fails on bad input leaves no empty directory behind
};

}  // namespace trident
