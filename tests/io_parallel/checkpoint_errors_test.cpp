// What the collective reader and writer refuse, and how: damaged files throw CheckpointError naming
// the file and the dataset, wrong descriptions throw std::invalid_argument, and every rank throws
// the same message (so no rank waits in a collective that the others left).
#include <hdf5.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "io_parallel_support.hpp"

namespace trident::io_parallel_test {
namespace {

namespace fs = std::filesystem;

const std::vector<std::int64_t> kWeightShape = {6, 12};
const std::vector<std::int64_t> kBiasShape = {12};
const char* const kWeight = "model/h/0/attn/c_attn/weight";
const char* const kBias = "model/h/0/attn/c_attn/bias";
constexpr int kWeightSalt = 5, kBiasSalt = 6;

// Writes weight (q|k|v column blocks) and bias (rows) split over the world; returns the file.
std::string write_small(const std::string& dir) {
  const int r = world_rank(), p = world_size();
  Held weight = column_blocks(kWeight, kWeightShape, 3, r, p);
  Held bias = rows(kBias, kBiasShape, r, p);
  weight.fill(kWeightSalt);
  bias.fill(kBiasSalt);
  return write_checkpoint_collective(MPI_COMM_WORLD, dir, 1, 2, slices_of({&weight, &bias}),
                                     {{"step", std::int64_t{1}}});
}

// The error the collective read of `path` (each rank reading rows of both tensors) throws.
std::string read_error(const std::string& path, std::vector<std::int64_t> weight_shape = kWeightShape) {
  const int r = world_rank(), p = world_size();
  Held weight = rows(kWeight, weight_shape, r, p);
  Held bias = rows(kBias, kBiasShape, r, p);
  return message_of<CheckpointError>([&] {
    read_checkpoint_collective(MPI_COMM_WORLD, path, slices_of({&weight, &bias}), {true, true});
  });
}

// Runs `damage` on rank 0 with the serial HDF5 driver (no other rank has the file open).
template <class F>
void on_rank0(F damage) {
  if (world_rank() == 0) damage();
  MPI_Barrier(MPI_COMM_WORLD);
}

void expect_same_on_every_rank(const std::string& message) {
  EXPECT_EQ(message, broadcast(message)) << "rank " << world_rank() << " threw another message";
}

void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

using CheckpointErrors = SharedDirTest;

TEST_F(CheckpointErrors, AnIntactFileReadsWithoutError) {
  const std::string path = write_small(dir_);
  const int r = world_rank(), p = world_size();
  Held weight = rows(kWeight, kWeightShape, r, p);
  Held bias = rows(kBias, kBiasShape, r, p);
  EXPECT_NO_THROW(read_checkpoint_collective(MPI_COMM_WORLD, path, slices_of({&weight, &bias}), {true, true}));
  EXPECT_EQ(weight.mismatches(kWeightSalt), 0);
  EXPECT_EQ(bias.mismatches(kBiasSalt), 0);
}

TEST_F(CheckpointErrors, FlippedBytesFailTheDatasetsChecksum) {
  const std::string path = write_small(dir_);
  on_rank0([&] {
    haddr_t offset = HADDR_UNDEF;
    {
      const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
      const hid_t dataset = H5Dopen2(file, kWeight, H5P_DEFAULT);
      offset = H5Dget_offset(dataset);  // contiguous: the data is one run of bytes from here
      H5Dclose(dataset);
      H5Fclose(file);
    }
    ASSERT_NE(offset, HADDR_UNDEF);
    std::fstream bytes(path, std::ios::in | std::ios::out | std::ios::binary);
    char word[4];
    bytes.seekg(static_cast<std::streamoff>(offset + 4 * 17));
    bytes.read(word, sizeof word);
    for (char& c : word) c = static_cast<char>(~c);
    bytes.seekp(static_cast<std::streamoff>(offset + 4 * 17));
    bytes.write(word, sizeof word);
  });
  const std::string message = read_error(path);
  expect_contains(message, path);
  expect_contains(message, std::string("'") + kWeight + "'");
  expect_contains(message, "checksum");
  expect_same_on_every_rank(message);
}

TEST_F(CheckpointErrors, ADeletedDatasetIsNamedMissing) {
  const std::string path = write_small(dir_);
  on_rank0([&] {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    EXPECT_GE(H5Ldelete(file, kBias, H5P_DEFAULT), 0);
    H5Fclose(file);
  });
  const std::string message = read_error(path);
  expect_contains(message, path);
  expect_contains(message, std::string("'") + kBias + "' is missing");
  expect_same_on_every_rank(message);
}

TEST_F(CheckpointErrors, AMissingGroupIsNamedMissingToo) {
  const std::string path = write_small(dir_);
  on_rank0([&] {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    EXPECT_GE(H5Ldelete(file, "model/h/0/attn", H5P_DEFAULT), 0);
    H5Fclose(file);
  });
  const std::string message = read_error(path);
  expect_contains(message, std::string("'") + kWeight + "' is missing");
  expect_same_on_every_rank(message);
}

TEST_F(CheckpointErrors, AWrongShapeIsNamed) {
  const std::string path = write_small(dir_);
  const std::string message = read_error(path, {6, 13});
  expect_contains(message, path);
  expect_contains(message, std::string("'") + kWeight + "' has shape [6, 12] but expected [6, 13]");
  expect_same_on_every_rank(message);
}

TEST_F(CheckpointErrors, AMissingChecksumAttributeIsNamed) {
  const std::string path = write_small(dir_);
  on_rank0([&] {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    EXPECT_GE(H5Adelete_by_name(file, kBias, "checksum", H5P_DEFAULT), 0);
    H5Fclose(file);
  });
  const std::string message = read_error(path);
  expect_contains(message, std::string("'") + kBias + "' has no checksum");
  expect_same_on_every_rank(message);
}

TEST_F(CheckpointErrors, ATruncatedFileIsNamed) {
  const std::string path = write_small(dir_);
  on_rank0([&] { fs::resize_file(path, fs::file_size(path) / 2); });
  const std::string message = read_error(path);
  expect_contains(message, path);
  expect_same_on_every_rank(message);
}

TEST_F(CheckpointErrors, AFileThatIsNotHdf5IsNamed) {
  const std::string path = (fs::path(dir_) / "step_00000001.h5").string();
  on_rank0([&] { std::ofstream(path) << "not a checkpoint\n"; });
  const std::string message = read_error(path);
  expect_contains(message, path);
  expect_same_on_every_rank(message);
  expect_contains(read_error(path + ".absent"), path + ".absent");
}

TEST_F(CheckpointErrors, RanksThatDisagreeOnShapesAreRefusedOnAllRanks) {
  if (world_size() == 1) GTEST_SKIP() << "needs two ranks to disagree";
  // Every rank holds the tensor whole, so each slice is valid locally; only the shapes differ.
  Held bias = whole(kBias, world_rank() == 1 ? std::vector<std::int64_t>{13} : kBiasShape);
  const std::string message = message_of<std::invalid_argument>([&] {
    write_checkpoint_collective(MPI_COMM_WORLD, dir_, 1, 2, slices_of({&bias}), {});
  });
  expect_contains(message, "different");
  expect_same_on_every_rank(message);
  EXPECT_TRUE(checkpoint_candidates(dir_).empty());
}

TEST_F(CheckpointErrors, BoxesThatLeaveAGapAreRefused) {
  const int r = world_rank(), p = world_size();
  Held bias = r == p - 1 ? nothing(kBias, kBiasShape) : rows(kBias, kBiasShape, r, p);
  const std::string message = message_of<std::invalid_argument>([&] {
    write_checkpoint_collective(MPI_COMM_WORLD, dir_, 1, 2, slices_of({&bias}), {});
  });
  expect_contains(message, kBias);
  expect_same_on_every_rank(message);
}

// The bias split in rows, except that the last rank's box reaches past the tensor's end.
Held bias_overrunning_on_last_rank() {
  const int r = world_rank(), p = world_size();
  if (r < p - 1) return rows(kBias, kBiasShape, r, p);
  const SliceBox past_the_end{{4}, {0}, {12}};
  return Held(kBias, kBiasShape, {20}, {past_the_end});
}

TEST_F(CheckpointErrors, ABoxOutsideTheTensorOnOneRankIsReportedByAll) {
  Held bias = bias_overrunning_on_last_rank();
  const std::string message = message_of<std::invalid_argument>([&] {
    write_checkpoint_collective(MPI_COMM_WORLD, dir_, 1, 2, slices_of({&bias}), {});
  });
  expect_contains(message, "does not fit");
  expect_same_on_every_rank(message);
}

// Rank 0 holds elements [0, 8) twice over (boxes [0, 8) and [4, 8)): as many elements as the
// tensor, so the counts match, but [8, 12) is nobody's.
Held bias_overlapping_on_rank0() {
  if (world_rank() != 0) return nothing(kBias, kBiasShape);
  const SliceBox first{{0}, {0}, {8}}, again{{4}, {4}, {4}};
  return Held(kBias, kBiasShape, kBiasShape, {first, again});
}

TEST_F(CheckpointErrors, OverlappingBoxesAreRefused) {
  Held bias = bias_overlapping_on_rank0();
  const std::string message = message_of<std::invalid_argument>([&] {
    write_checkpoint_collective(MPI_COMM_WORLD, dir_, 1, 2, slices_of({&bias}), {});
  });
  expect_contains(message, "overlap");
  expect_same_on_every_rank(message);
}

TEST_F(CheckpointErrors, ElementsCountedTwiceForTheChecksumAreRefused) {
  const std::string path = write_small(dir_);
  if (world_size() == 1) GTEST_SKIP() << "one rank counts everything once";
  Held weight = whole(kWeight, kWeightShape), bias = whole(kBias, kBiasShape);
  const std::string message = message_of<std::invalid_argument>([&] {
    read_checkpoint_collective(MPI_COMM_WORLD, path, slices_of({&weight, &bias}), {true, true});
  });
  expect_contains(message, "counted for the checksum");
  expect_same_on_every_rank(message);
}

}  // namespace
}  // namespace trident::io_parallel_test
