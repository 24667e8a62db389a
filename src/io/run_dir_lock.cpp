#include "io/run_dir_lock.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "common/error.hpp"
#include "io/run_dir.hpp"

namespace trident {

namespace {

namespace fs = std::filesystem;

// Who holds a lock: the first line of the lock file, "host pid start_ticks".
struct Owner {
  std::string host;
  long pid = 0;
  unsigned long long start_ticks = 0;  // /proc/<pid>/stat field 22: tells a reused pid apart
  std::string text() const { return "pid " + std::to_string(pid) + " on host " + host; }
};

std::string this_host() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// What /proc/<pid>/stat says of a process: its state letter and its start time in clock ticks
// since boot. A process that does not exist reads as state 'X' (dead), start 0.
struct ProcessStat {
  char state = 'X';
  unsigned long long start_ticks = 0;
};

ProcessStat process_stat(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  ProcessStat result;
  if (!std::getline(stat, line)) return result;
  std::istringstream fields(line.substr(line.rfind(')') + 2));  // after "pid (comm) "
  fields >> result.state;
  std::string skipped;
  for (int field = 4; field < 22; ++field) fields >> skipped;  // ppid ... itrealvalue
  fields >> result.start_ticks;
  return result;
}

Owner read_owner(const std::string& path) {
  Owner owner;
  std::ifstream file(path);
  file >> owner.host >> owner.pid >> owner.start_ticks;
  return owner;
}

// A killed rank whose parent has not reaped it yet (mpirun exited first, and a container's init
// may never reap) is a zombie: it still answers kill(pid, 0) but holds nothing.
bool alive_here(const Owner& owner) {
  if (owner.pid <= 0) return false;
  if (kill(static_cast<pid_t>(owner.pid), 0) != 0 && errno != EPERM) return false;
  const ProcessStat stat = process_stat(owner.pid);
  if (stat.state == 'Z' || stat.state == 'X') return false;
  return owner.start_ticks == 0 || stat.start_ticks == owner.start_ticks;
}

// Writes this process's line to a file of its own, then links it to `path`: the link fails if
// another run holds the lock, so that exactly one of two runs starting at once gets it.
bool try_create(const std::string& path) {
  const std::string mine = path + "." + std::to_string(getpid());
  {
    std::ofstream file(mine, std::ios::trunc);
    file << this_host() << " " << getpid() << " " << process_stat(getpid()).start_ticks << "\n";
    if (!file)
      throw InputError("cannot write " + mine + ": " + std::strerror(errno) +
                       "; set output.dir to a writable directory");
  }
  const bool created = link(mine.c_str(), path.c_str()) == 0;
  const int link_errno = errno;
  unlink(mine.c_str());
  if (!created && link_errno != EEXIST)
    throw InputError("cannot create " + path + ": " + std::strerror(link_errno) +
                     "; set output.dir to a writable directory");
  return created;
}

}  // namespace

RunDirLock::RunDirLock(const std::string& dir, std::ostream& log)
    : dir_(dir), path_((fs::path(dir) / kRunDirLockFile).string()) {
  std::error_code error;
  created_dir_ = !fs::exists(dir, error);
  create_run_dir(dir);
  if (try_create(path_)) return;
  const Owner owner = read_owner(path_);
  if (owner.host != this_host() || alive_here(owner)) {
    throw InputError("output.dir = '" + dir + "' is in use by another trident run (" + owner.text() + ", lock " +
                     path_ + "); wait for it to finish, stop it, or set output.dir to another directory. If that " +
                     "run is gone (a crashed node), delete " + path_);
  }
  log << "  taking over " << path_ << ": its run (" << owner.text() << ") is gone\n";
  fs::remove(path_, error);
  if (!try_create(path_)) {
    throw InputError("output.dir = '" + dir + "': another trident run took the lock " + path_ +
                     " at the same moment (" + read_owner(path_).text() + "); set output.dir to another directory");
  }
}

RunDirLock::~RunDirLock() {
  unlink(path_.c_str());
  std::error_code ignored;
  if (created_dir_ && fs::is_empty(dir_, ignored)) fs::remove(dir_, ignored);
}

}  // namespace trident
