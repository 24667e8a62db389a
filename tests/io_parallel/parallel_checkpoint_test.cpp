// Writing and reading checkpoints collectively on the world (1, 2 or 4 ranks): what one split
// writes, another split reads back bit for bit, and the commit protocol leaves only complete files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "io/staged_checkpoint.hpp"
#include "io_parallel_support.hpp"

namespace trident::io_parallel_test {
namespace {

namespace fs = std::filesystem;

// The tensors of the tests, with their salts (reference_value) and shapes.
constexpr int kQkvSalt = 1, kRowsSalt = 2, kBiasSalt = 3, kOwnedSalt = 4;
const std::vector<std::int64_t> kQkvShape = {5, 24};  // c_attn-like [C, 3C] with q|k|v blocks of 8 columns
const std::vector<std::int64_t> kRowsShape = {7, 3};
const std::vector<std::int64_t> kBiasShape = {10};
const std::vector<std::int64_t> kOwnedShape = {3, 4};
const char* const kQkv = "model/h/0/attn/c_attn/weight";
const char* const kRows = "model/wpe/weight";
const char* const kBias = "model/h/0/ln_1/bias";
const char* const kOwned = "optimizer/m/ln_f/weight";  // held whole by the last rank, by nothing elsewhere

Attributes test_attributes(int step) {
  return {{"step", std::int64_t{step}},
          {"format_version", std::int64_t{1}},
          {"lr", 0.25},
          {"grid", std::string("1x1x") + std::to_string(world_size())},
          {"deck", std::string("[model]\nlayers = 1\n# ünïcode and a long line ") + std::string(300, '=')}};
}

// The four tensors split as the trainer would (q|k|v column blocks, rows, rows, one owner), filled.
struct Split {
  Split()
      : qkv(column_blocks(kQkv, kQkvShape, 3, world_rank(), world_size())),
        by_rows(rows(kRows, kRowsShape, world_rank(), world_size())),
        bias(rows(kBias, kBiasShape, world_rank(), world_size())),
        owned(world_rank() == world_size() - 1 ? whole(kOwned, kOwnedShape) : nothing(kOwned, kOwnedShape)) {
    qkv.fill(kQkvSalt);
    by_rows.fill(kRowsSalt);
    bias.fill(kBiasSalt);
    owned.fill(kOwnedSalt);
  }
  std::vector<TensorSlice> slices() { return slices_of({&qkv, &by_rows, &bias, &owned}); }
  Held qkv, by_rows, bias, owned;
};

std::string write_split(const std::string& dir, int step, int keep) {
  Split split;
  return write_checkpoint_collective(MPI_COMM_WORLD, dir, step, keep, split.slices(), test_attributes(step));
}

// Reads `path` back with the splits exchanged (column blocks in rows and vice versa, the owned tensor
// by the first rank) and expects every value.
void expect_values_read_back_exchanged(const std::string& path) {
  const int r = world_rank(), p = world_size();
  Held qkv = rows(kQkv, kQkvShape, r, p);
  Held by_rows = column_blocks(kRows, kRowsShape, 1, r, p);
  Held bias = rows(kBias, kBiasShape, p - 1 - r, p);
  Held owned = r == 0 ? whole(kOwned, kOwnedShape) : nothing(kOwned, kOwnedShape);
  read_checkpoint_collective(MPI_COMM_WORLD, path, slices_of({&qkv, &by_rows, &bias, &owned}),
                             std::vector<bool>(4, true));
  EXPECT_EQ(qkv.mismatches(kQkvSalt), 0);
  EXPECT_EQ(by_rows.mismatches(kRowsSalt), 0);
  EXPECT_EQ(bias.mismatches(kBiasSalt), 0);
  EXPECT_EQ(owned.mismatches(kOwnedSalt), 0);
}

using ParallelCheckpoint = SharedDirTest;

TEST_F(ParallelCheckpoint, EveryRankReadsWholeTensorsWrittenInSlices) {
  const std::string path = write_split(dir_, 3, 2);
  EXPECT_EQ(path, (fs::path(dir_) / "step_00000003.h5").string());

  Held qkv = whole(kQkv, kQkvShape), by_rows = whole(kRows, kRowsShape), bias = whole(kBias, kBiasShape),
       owned = whole(kOwned, kOwnedShape);
  const bool counted = world_rank() == 0;  // every rank holds everything: count it once
  const Attributes attributes = read_checkpoint_collective(
      MPI_COMM_WORLD, path, slices_of({&qkv, &by_rows, &bias, &owned}), std::vector<bool>(4, counted));
  EXPECT_EQ(qkv.mismatches(kQkvSalt), 0);
  EXPECT_EQ(by_rows.mismatches(kRowsSalt), 0);
  EXPECT_EQ(bias.mismatches(kBiasSalt), 0);
  EXPECT_EQ(owned.mismatches(kOwnedSalt), 0);

  EXPECT_EQ(attribute_value<std::int64_t>(attributes, "step"), 3);
  EXPECT_EQ(attribute_value<double>(attributes, "lr"), 0.25);
  EXPECT_EQ(attribute_value<std::string>(attributes, "grid"), "1x1x" + std::to_string(world_size()));
  EXPECT_EQ(attribute_value<std::string>(attributes, "deck"),
            std::get<std::string>(test_attributes(3).back().second));
}

TEST_F(ParallelCheckpoint, ReadsBackWithTheSplitsExchanged) {
  const std::string path = write_split(dir_, 1, 2);
  expect_values_read_back_exchanged(path);
  // Reading touches the boxes only: the padding around them in the local array keeps its (NaN) contents.
  Held padded(kQkv, kQkvShape, {7, 26}, {SliceBox{{0, 0}, {1, 1}, kQkvShape}});
  read_checkpoint_collective(MPI_COMM_WORLD, path, slices_of({&padded}), {world_rank() == 0});
  EXPECT_EQ(padded.mismatches(kQkvSalt), 0);
  EXPECT_TRUE(std::isnan(padded.storage()[0]));
  EXPECT_TRUE(std::isnan(padded.storage().back()));
}

TEST_F(ParallelCheckpoint, CommitKeepsTheNewestAndPointsLatestAtIt) {
  if (world_rank() == 0) std::ofstream(fs::path(dir_) / "step_00000099.h5.tmp") << "a write that died";
  MPI_Barrier(MPI_COMM_WORLD);
  for (int step = 1; step <= 4; ++step) write_split(dir_, step, 2);

  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"latest", "step_00000003.h5", "step_00000004.h5"}));
  std::ifstream latest(fs::path(dir_) / "latest");
  std::string target;
  std::getline(latest, target);
  EXPECT_EQ(target, "step_00000004.h5");
  EXPECT_EQ(checkpoint_candidates(dir_), (std::vector<std::string>{(fs::path(dir_) / "step_00000004.h5").string(),
                                                                   (fs::path(dir_) / "step_00000003.h5").string()}));
}

TEST_F(ParallelCheckpoint, WritesIntoADirectoryThatDoesNotExistYet) {
  const std::string nested = (fs::path(dir_) / "run" / "checkpoints").string();
  const std::string path = write_split(nested, 2, 1);
  EXPECT_TRUE(fs::exists(path));
}

// checkpoint.async's writer: the file created collectively, the data written by a thread of each
// rank, then committed. Read back by the usual reader, its checksums verified.
TEST_F(ParallelCheckpoint, AStagedWriteFromThreadsReadsBackLikeTheOneCallWrite) {
  Split split;
  const StagedCheckpoint staged = create_staged_checkpoint(MPI_COMM_WORLD, dir_, 6, 2, split.slices(),
                                                           test_attributes(6));
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "latest")) << "nothing is committed before stage 3";
  StagedWrite written;
  std::thread writer([&] { written = write_staged_data(staged); });
  writer.join();
  EXPECT_EQ(written.failure, "");
  EXPECT_EQ(written.bytes, static_cast<std::int64_t>(sizeof(float)) *
                               (slice_elements(split.qkv.slice()) + slice_elements(split.by_rows.slice()) +
                                slice_elements(split.bias.slice()) + slice_elements(split.owned.slice())));
  const std::string path = commit_staged_checkpoint(MPI_COMM_WORLD, staged, written);
  EXPECT_EQ(path, (fs::path(dir_) / "step_00000006.h5").string());
  EXPECT_EQ(checkpoint_candidates(dir_), std::vector<std::string>{path});
  expect_values_read_back_exchanged(path);
}

// A data write that failed on one rank (the last): every rank throws its message, the file is
// removed, and the previous checkpoint stays `latest`.
TEST_F(ParallelCheckpoint, AStagedWriteThatFailedOnOneRankFailsOnEveryRank) {
  const std::string previous = write_split(dir_, 1, 2);
  Split split;
  const StagedCheckpoint staged = create_staged_checkpoint(MPI_COMM_WORLD, dir_, 2, 2, split.slices(),
                                                           test_attributes(2));
  StagedWrite written = write_staged_data(staged);
  if (world_rank() == world_size() - 1) written.failure = "write of dataset 'x' failed (Input/output error)";
  const std::string message =
      message_of<CheckpointError>([&] { commit_staged_checkpoint(MPI_COMM_WORLD, staged, written); });
  EXPECT_NE(message.find("write of dataset 'x' failed (Input/output error)"), std::string::npos) << message;
  EXPECT_NE(message.find("needed,"), std::string::npos) << message;
  EXPECT_EQ(broadcast(message), message) << "every rank reports the same failure";
  EXPECT_FALSE(fs::exists(staged.tmp_path));
  EXPECT_EQ(checkpoint_candidates(dir_), std::vector<std::string>{previous});
}

}  // namespace
}  // namespace trident::io_parallel_test
