#include "train/checkpoint_space.hpp"

#include <filesystem>
#include <ostream>

#include "io/checkpoint_files.hpp"
#include "plan/units.hpp"
#include "train/checkpoint.hpp"

namespace trident {

namespace fs = std::filesystem;

namespace {

// The directory itself when it exists, else its nearest existing parent: where the files will go.
fs::path existing_ancestor(fs::path dir) {
  std::error_code error;
  dir = fs::absolute(dir, error);
  while (!fs::is_directory(dir, error) && dir.has_relative_path()) dir = dir.parent_path();
  return dir;
}

std::string bytes(std::int64_t count) { return human_bytes(static_cast<double>(count)); }

}  // namespace

void warn_if_checkpoints_may_not_fit(const Deck& deck, std::ostream& log) {
  const fs::path dir = existing_ancestor(checkpoint_dir(deck));
  const std::int64_t free = free_disk_bytes(dir.string());
  if (free < 0) return;
  std::int64_t existing = 0;
  std::error_code error;
  for (const std::string& path : checkpoint_candidates(checkpoint_dir(deck)))
    existing += static_cast<std::int64_t>(fs::file_size(path, error));
  const std::int64_t one = checkpoint_bytes(deck);
  const std::int64_t needed = (deck.checkpoint.keep + 1) * one;
  if (free + existing >= needed) return;
  log << "  warning: checkpoint.keep + 1 = " << deck.checkpoint.keep + 1 << " checkpoints of "
      << bytes(one) << " need " << bytes(needed) << ", but " << dir.string() << " has "
      << bytes(free) << " free" << (existing > 0 ? " and " + bytes(existing) + " in checkpoints already there" : "")
      << ": a checkpoint write may fail for lack of space (free space there, lower checkpoint.keep, or set "
         "checkpoint.dir to a larger file system)\n";
}

}  // namespace trident
