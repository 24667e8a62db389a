// Shared pieces of the collective checkpoint tests: the world, a scratch directory that all ranks
// share, tensors with known values, and the ways a rank can hold a tensor (whole, rows, column
// blocks like q|k|v, nothing).
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <gtest/gtest.h>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "io/parallel_checkpoint.hpp"
#include "mpi_world.hpp"

namespace trident::io_parallel_test {

using testing_mpi::world_rank;
using testing_mpi::world_size;

// Rank 0's string on every rank.
inline std::string broadcast(std::string text) {
  int length = static_cast<int>(text.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  text.resize(static_cast<std::size_t>(length));
  MPI_Bcast(text.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  return text;
}

// The value of element `index` of test tensor `salt`: irregular bits, the same on every rank.
inline float reference_value(int salt, std::int64_t index) {
  return static_cast<float>(std::sin(0.7 * static_cast<double>(index) + salt) * (salt + 1));
}

// A TensorSlice and the local array it points into (kept together so the pointer stays valid).
class Held {
 public:
  Held(std::string path, std::vector<std::int64_t> global_shape, std::vector<std::int64_t> local_shape,
       std::vector<SliceBox> boxes)
      : storage_(static_cast<std::size_t>(element_count(local_shape)), std::numeric_limits<float>::quiet_NaN()) {
    slice_.path = std::move(path);
    slice_.global_shape = std::move(global_shape);
    slice_.local_shape = std::move(local_shape);
    slice_.boxes = std::move(boxes);
    slice_.data = storage_.empty() ? nullptr : storage_.data();
  }
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;

  const TensorSlice& slice() const { return slice_; }
  std::vector<float>& storage() { return storage_; }

  // Calls f(global flat index, local flat index) for every element of the boxes.
  template <class F>
  void for_each_element(F f) const {
    const std::size_t rank = slice_.global_shape.size();
    for (const SliceBox& box : slice_.boxes) {
      const std::int64_t n = box_elements(box);
      for (std::int64_t k = 0; k < n; ++k) {
        std::int64_t rest = k, global = 0, local = 0, global_stride = 1, local_stride = 1;
        for (std::size_t d = rank; d-- > 0;) {
          const std::int64_t offset = rest % box.count[d];
          rest /= box.count[d];
          global += (box.global_start[d] + offset) * global_stride;
          local += (box.local_start[d] + offset) * local_stride;
          global_stride *= slice_.global_shape[d];
          local_stride *= slice_.local_shape[d];
        }
        f(global, local);
      }
    }
  }

  void fill(int salt) {
    for_each_element([&](std::int64_t global, std::int64_t local) { storage_[local] = reference_value(salt, global); });
  }

  // Number of box elements that differ (bitwise) from the reference; 0 is a perfect read.
  std::int64_t mismatches(int salt) const {
    std::int64_t wrong = 0;
    for_each_element([&](std::int64_t global, std::int64_t local) {
      const float expected = reference_value(salt, global);
      if (std::memcmp(&storage_[local], &expected, sizeof expected) != 0) ++wrong;
    });
    return wrong;
  }

 private:
  TensorSlice slice_;
  std::vector<float> storage_;
};

// [begin, end) of part `r` of `n` items split into `parts` near-equal parts (some may be empty).
inline std::pair<std::int64_t, std::int64_t> part(std::int64_t n, int parts, int r) {
  return {n * r / parts, n * (r + 1) / parts};
}

inline Held whole(const std::string& path, const std::vector<std::int64_t>& shape) {
  return Held(path, shape, shape, {SliceBox{std::vector<std::int64_t>(shape.size(), 0),
                                            std::vector<std::int64_t>(shape.size(), 0), shape}});
}

// No boxes; the local shape is left empty, as a caller that holds nothing of a tensor may.
inline Held nothing(const std::string& path, const std::vector<std::int64_t>& shape) {
  return Held(path, shape, {}, {});
}

// Rows (first dimension) split across `parts` ranks; this is part `r`.
inline Held rows(const std::string& path, const std::vector<std::int64_t>& shape, int r, int parts) {
  const auto [begin, end] = part(shape[0], parts, r);
  std::vector<std::int64_t> local = shape;
  local[0] = end - begin;
  std::vector<std::int64_t> global_start(shape.size(), 0);
  global_start[0] = begin;
  return Held(path, shape, local, {SliceBox{global_start, std::vector<std::int64_t>(shape.size(), 0), local}});
}

// A 2-D [R, C] tensor whose columns are `blocks` equal blocks (q|k|v), each split across `parts`
// ranks: part r holds its columns of every block, side by side (local [R, blocks * width]).
inline Held column_blocks(const std::string& path, const std::vector<std::int64_t>& shape, int blocks, int r,
                          int parts) {
  const std::int64_t block = shape[1] / blocks;
  const auto [begin, end] = part(block, parts, r);
  const std::int64_t width = end - begin;
  std::vector<SliceBox> boxes;
  for (int b = 0; b < blocks; ++b) boxes.push_back({{0, b * block + begin}, {0, b * width}, {shape[0], width}});
  return Held(path, shape, {shape[0], blocks * width}, boxes);
}

inline std::vector<TensorSlice> slices_of(const std::vector<Held*>& held) {
  std::vector<TensorSlice> slices;
  for (const Held* h : held) slices.push_back(h->slice());
  return slices;
}

// The message of the exception E that f throws ("" and a test failure when it throws none).
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

// A scratch directory that every rank sees, created by rank 0 and removed after the test.
class SharedDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name;
    if (world_rank() == 0) {
      const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
      const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                         ("trident_io_parallel_" + std::to_string(::getpid()) + "_" +
                                          test->test_suite_name() + "_" + test->name());
      std::filesystem::remove_all(path);
      std::filesystem::create_directories(path);
      name = path.string();
    }
    dir_ = broadcast(name);
  }
  void TearDown() override {
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) std::filesystem::remove_all(dir_);
  }

  std::string dir_;
};

}  // namespace trident::io_parallel_test
