// The run directory: created with its parents, holding an exact copy of the deck.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "io/run_dir.hpp"

namespace trident {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::path(::testing::TempDir()) / (std::string("trident_run_dir_") + info->name());
  fs::remove_all(dir);
  return dir;
}

std::string read_text(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(RunDir, CreatesParentsAndCopiesTheDeck) {
  const fs::path dir = fresh_dir() / "runs" / "tiny";
  const std::string deck = "[model]\nlayers = 2\n# ünïcode survives\n";
  prepare_run_dir(dir.string(), deck);
  EXPECT_EQ(read_text(dir / kDeckCopyFile), deck);
  EXPECT_FALSE(fs::exists(dir / (std::string(kDeckCopyFile) + ".tmp")));
}

TEST(RunDir, ReplacesAnOlderDeckCopy) {
  const fs::path dir = fresh_dir();
  prepare_run_dir(dir.string(), "old = 1\n");
  prepare_run_dir(dir.string(), "new = 2\n");
  EXPECT_EQ(read_text(dir / kDeckCopyFile), "new = 2\n");
}

TEST(RunDir, UnwritableLocationNamesPathAndKey) {
  const fs::path blocker = fresh_dir();
  std::ofstream(blocker) << "a file where a directory should be";
  const std::string dir = (blocker / "run").string();
  try {
    prepare_run_dir(dir, "x = 1\n");
    FAIL() << "a directory under a regular file cannot be created";
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("output.dir"), std::string::npos) << message;
    EXPECT_NE(message.find(dir), std::string::npos) << message;
  }
  fs::remove(blocker);
}

}  // namespace
}  // namespace trident
