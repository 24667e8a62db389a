#include "io/checkpoint_files.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <system_error>

namespace trident {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPrefix = "step_";
constexpr std::string_view kSuffix = ".h5";

// The step of a checkpoint file name "step_<digits>.h5"; nullopt for any other name (*.tmp included).
std::optional<long long> step_of(const std::string& name) {
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return std::nullopt;
  const std::string digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) {
        return c >= '0' && c <= '9';
      }))
    return std::nullopt;
  return std::stoll(digits);
}

[[noreturn]] void throw_errno(const std::string& operation, const std::string& path) {
  throw std::runtime_error("cannot " + operation + " '" + path + "': " + std::strerror(errno));
}

// fsync of a file or directory: rename is only durable once the data and the directory entry are.
void sync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) throw_errno("open", path);
  const int result = ::fsync(fd);
  const int fsync_errno = errno;
  ::close(fd);
  // Some file systems refuse fsync on directories (EINVAL); the rename is still atomic there.
  if (result != 0 && fsync_errno != EINVAL) {
    errno = fsync_errno;
    throw_errno("fsync", path);
  }
}

// Replaces `path` with `text` atomically: readers see the old or the new file, never a torn one.
void replace_text_file(const fs::path& path, const std::string& text) {
  const std::string tmp = path.string() + kTmpSuffix;
  {
    errno = 0;
    std::ofstream out(tmp, std::ios::trunc);
    out << text << "\n";
    out.close();
    if (!out) throw_errno("write", tmp);
  }
  sync_path(tmp, O_RDONLY);
  fs::rename(tmp, path);
}

// The file name `latest` holds (trailing whitespace dropped), or "" when there is none.
std::string latest_target(const fs::path& dir) {
  std::ifstream in(dir / kLatestFile);
  std::string name;
  std::getline(in, name);
  while (!name.empty() && (name.back() == '\r' || name.back() == ' ' || name.back() == '\t')) name.pop_back();
  return name;
}

// Left behind by a write that died before its commit: a checkpoint's or latest's temporary file.
bool is_stale_tmp(const std::string& name) {
  if (!name.ends_with(kTmpSuffix)) return false;
  const std::string base = name.substr(0, name.size() - std::string_view(kTmpSuffix).size());
  return base == kLatestFile || step_of(base).has_value();
}

// "1.56 MiB", "73.02 GiB": sizes in messages.
std::string binary_size(std::int64_t bytes) {
  const char* units[] = {"MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / (1024.0 * 1024.0);
  int unit = 0;
  for (; unit < 2 && value >= 1024.0; ++unit) value /= 1024.0;
  char text[32];
  std::snprintf(text, sizeof text, "%.2f %s", value, units[unit]);
  return text;
}

}  // namespace

std::int64_t free_disk_bytes(const std::string& dir) {
  struct statvfs space {};
  if (statvfs(dir.c_str(), &space) != 0) return -1;
  return static_cast<std::int64_t>(space.f_bavail) * static_cast<std::int64_t>(space.f_frsize);
}

std::int64_t checkpoint_file_bound(std::int64_t data_bytes, std::int64_t datasets, std::int64_t attribute_bytes) {
  return data_bytes + datasets * 2048 + 16384 + attribute_bytes;
}

std::string disk_space_note(const std::string& dir, std::int64_t bytes) {
  const std::int64_t free = free_disk_bytes(dir);
  return binary_size(bytes) + " needed, " + (free < 0 ? "unknown" : binary_size(free)) + " free in " + dir;
}

void check_disk_space(const std::string& path, std::int64_t bytes) {
  const std::string dir = fs::path(path).parent_path().empty() ? "." : fs::path(path).parent_path().string();
  const auto refuse = [&](int reason) {
    throw std::runtime_error("cannot write '" + path + "': " + std::strerror(reason) + " (" +
                             disk_space_note(dir, bytes) + ")");
  };
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) refuse(errno);
  const int reserved = ::fallocate(fd, 0, 0, static_cast<off_t>(bytes));
  const int reserve_errno = errno;
  ::close(fd);
  ::unlink(path.c_str());
  if (reserved == 0) return;
  if (reserve_errno != EOPNOTSUPP) refuse(reserve_errno);
  const std::int64_t free = free_disk_bytes(dir);
  if (free >= 0 && free < bytes) refuse(ENOSPC);
}

std::string checkpoint_file_name(int step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08d.h5", step);
  return name;
}

void commit_checkpoint(const std::string& tmp_path, const std::string& final_path, int keep) {
  const fs::path final_file(final_path);
  const fs::path dir = final_file.parent_path().empty() ? fs::path(".") : final_file.parent_path();
  fs::rename(tmp_path, final_file);
  try {
    replace_text_file(dir / kLatestFile, final_file.filename().string());
  } catch (...) {
    // `latest` still names the previous checkpoint: leave the directory as it was before.
    std::error_code ignored;
    fs::remove(dir / (std::string(kLatestFile) + kTmpSuffix), ignored);
    fs::remove(final_file, ignored);
    throw;
  }
  sync_path(dir.string(), O_RDONLY | O_DIRECTORY);

  const std::vector<std::string> candidates = checkpoint_candidates(dir.string());
  for (std::size_t i = static_cast<std::size_t>(std::max(keep, 1)); i < candidates.size(); ++i)
    fs::remove(candidates[i]);
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() && is_stale_tmp(entry.path().filename().string())) fs::remove(entry.path());
}

std::vector<std::string> checkpoint_candidates(const std::string& dir) {
  std::error_code missing;
  if (!fs::is_directory(dir, missing)) return {};
  struct Checkpoint {
    long long step;
    std::string name;
  };
  std::vector<Checkpoint> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (const auto step = step_of(name); step && entry.is_regular_file()) found.push_back({*step, name});
  }
  std::sort(found.begin(), found.end(), [](const Checkpoint& a, const Checkpoint& b) {
    return a.step != b.step ? a.step > b.step : a.name > b.name;
  });
  // `latest` is the commit point: its target is the checkpoint written last, even when a file of a
  // later step survives from an abandoned run.
  const std::string latest = latest_target(dir);
  std::stable_partition(found.begin(), found.end(), [&](const Checkpoint& c) { return c.name == latest; });
  std::vector<std::string> paths;
  for (const Checkpoint& c : found) paths.push_back((fs::path(dir) / c.name).string());
  return paths;
}

}  // namespace trident
