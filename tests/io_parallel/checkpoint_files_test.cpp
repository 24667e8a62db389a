// The checkpoint directory on its own (no MPI, each rank in a directory of its own): which files
// resume tries in which order, and what a commit leaves behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "io_parallel_support.hpp"

namespace trident::io_parallel_test {
namespace {

namespace fs = std::filesystem;

class CheckpointFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("trident_checkpoint_files_" + std::to_string(::getpid()) + "_" + test->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void touch(const std::string& name) const { std::ofstream(dir_ / name) << "x"; }
  void point_latest_at(const std::string& name) const { std::ofstream(dir_ / "latest") << name << "\n"; }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::vector<std::string> names() const {
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(dir_)) found.push_back(entry.path().filename().string());
    std::sort(found.begin(), found.end());
    return found;
  }

  fs::path dir_;
};

TEST_F(CheckpointFiles, FileNameIsZeroPadded) { EXPECT_EQ(checkpoint_file_name(5), "step_00000005.h5"); }

TEST_F(CheckpointFiles, CandidatesPutLatestFirstThenDescendingSteps) {
  for (const char* name : {"step_00000001.h5", "step_00000003.h5", "step_00000020.h5", "step_00000030.h5.tmp",
                           "step_x.h5", "notes.txt"})
    touch(name);
  point_latest_at("step_00000003.h5");
  EXPECT_EQ(checkpoint_candidates(dir_.string()),
            (std::vector<std::string>{path("step_00000003.h5"), path("step_00000020.h5"), path("step_00000001.h5")}));
}

TEST_F(CheckpointFiles, CandidatesIgnoreALatestWhoseFileIsGone) {
  touch("step_00000001.h5");
  touch("step_00000002.h5");
  point_latest_at("step_00000009.h5");
  EXPECT_EQ(checkpoint_candidates(dir_.string()),
            (std::vector<std::string>{path("step_00000002.h5"), path("step_00000001.h5")}));
}

TEST_F(CheckpointFiles, CandidatesOfAMissingDirectoryAreNone) {
  EXPECT_TRUE(checkpoint_candidates((dir_ / "absent").string()).empty());
}

TEST_F(CheckpointFiles, CommitRenamesPointsLatestPrunesAndClearsStaleTemporaries) {
  for (const char* name : {"step_00000001.h5", "step_00000002.h5", "step_00000009.h5.tmp", "latest.tmp", "keep.tmp"})
    touch(name);
  // A later step from an abandoned run stays behind the new commit in the order, so it is pruned first.
  touch("step_00000007.h5");
  touch("step_00000004.h5.tmp");
  commit_checkpoint(path("step_00000004.h5.tmp"), path("step_00000004.h5"), 2);
  EXPECT_EQ(names(), (std::vector<std::string>{"keep.tmp", "latest", "step_00000004.h5", "step_00000007.h5"}));
  std::ifstream latest(dir_ / "latest");
  std::string target;
  std::getline(latest, target);
  EXPECT_EQ(target, "step_00000004.h5");
  EXPECT_EQ(checkpoint_candidates(dir_.string()).front(), path("step_00000004.h5"));
}

}  // namespace
}  // namespace trident::io_parallel_test
