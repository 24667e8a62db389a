#include "io/run_dir.hpp"

#include <filesystem>
#include <fstream>

#include "common/error.hpp"

namespace trident {

namespace {

[[noreturn]] void reject(const std::string& dir, const std::string& what) {
  throw InputError("output.dir = '" + dir + "': " + what + "; set output.dir to a writable directory");
}

}  // namespace

void create_run_dir(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || !std::filesystem::is_directory(dir)) {
    reject(dir, "cannot create the run directory (" + (error ? error.message() : "not a directory") + ")");
  }
}

void prepare_run_dir(const std::string& dir, const std::string& deck_text) {
  namespace fs = std::filesystem;
  create_run_dir(dir);
  std::error_code error;

  const fs::path target = fs::path(dir) / kDeckCopyFile;
  const fs::path temporary = fs::path(dir) / (std::string(kDeckCopyFile) + ".tmp");
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << deck_text;
    file.close();
    if (!file) reject(dir, "cannot write " + temporary.string());
  }
  fs::rename(temporary, target, error);
  if (error) reject(dir, "cannot rename " + temporary.string() + " to " + target.string() + " (" + error.message() + ")");
}

}  // namespace trident
