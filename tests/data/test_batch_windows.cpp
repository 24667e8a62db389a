// The data each (dp rank, micro-batch) receives, against DESIGN.md "Parallel semantics".
// Tokens are 0, 1, 2, ... so a window's first input id tells which window it is.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "data/batch_windows.hpp"

namespace trident {
namespace {

TokenStream counting_tokens(std::int64_t count) {
  TokenStream stream{std::vector<std::int32_t>(static_cast<std::size_t>(count)), "counting"};
  std::iota(stream.tokens.begin(), stream.tokens.end(), 0);
  return stream;
}

// The global batch of `step` as [G, T] inputs and targets, gathered from every
// (dp rank, micro-batch) of a grid at position j = rank·mbs·m + microbatch·mbs + row.
struct GlobalBatch {
  std::vector<std::int32_t> inputs, targets;
};
GlobalBatch gather(const BatchWindows& windows, int step, int seq_len, int mbs, int m, int dp) {
  GlobalBatch batch;
  const std::size_t chunk = static_cast<std::size_t>(mbs) * seq_len;
  batch.inputs.resize(chunk * m * dp);
  batch.targets.resize(chunk * m * dp);
  for (int rank = 0; rank < dp; ++rank) {
    for (int k = 0; k < m; ++k) {
      const std::size_t at = (static_cast<std::size_t>(rank) * m + k) * chunk;
      windows.fill(step, rank, k, batch.inputs.data() + at, batch.targets.data() + at);
    }
  }
  return batch;
}

TEST(BatchWindows, CountsWindowsAsFloorOfTokensMinusOneOverT) {
  EXPECT_EQ(BatchWindows(counting_tokens(17), 4, 1, 1, 1).windows(), 4);
  EXPECT_EQ(BatchWindows(counting_tokens(16), 4, 1, 1, 1).windows(), 3);
  EXPECT_EQ(BatchWindows(counting_tokens(5), 4, 1, 1, 1).windows(), 1);
}

TEST(BatchWindows, TooFewTokensNamesSeqLen) {
  try {
    BatchWindows(counting_tokens(4), 4, 1, 1, 1);
    FAIL() << "4 tokens cannot fill a window of seq_len 4";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("model.seq_len = 4"), std::string::npos) << error.what();
  }
}

TEST(BatchWindows, TargetsAreInputsShiftedByOne) {
  const int seq_len = 8;
  const BatchWindows windows(counting_tokens(1000), seq_len, 2, 1, 1);
  std::vector<std::int32_t> inputs(2 * seq_len), targets(2 * seq_len);
  windows.fill(3, 0, 0, inputs.data(), targets.data());
  for (int row = 0; row < 2; ++row) {
    const std::int32_t window = 2 * 2 + row;  // step 3, G = 2
    for (int t = 0; t < seq_len; ++t) {
      EXPECT_EQ(inputs[row * seq_len + t], window * seq_len + t);
      EXPECT_EQ(targets[row * seq_len + t], window * seq_len + t + 1);
    }
  }
}

// Every grid with the same global batch G reads, in order j = 0..G-1, windows (s-1)·G + j mod N,
// and equals the single-rank run holding all G sequences as m·dp micro-batches.
TEST(BatchWindows, EveryGridSeesTheSameGlobalBatch) {
  const int seq_len = 5;
  const TokenStream stream = counting_tokens(7 * seq_len + 3);  // N = 7: steps wrap around soon
  for (int dp : {1, 2, 4}) {
    for (int m : {1, 3}) {
      for (int mbs : {1, 2}) {
        SCOPED_TRACE("dp " + std::to_string(dp) + " m " + std::to_string(m) + " mbs " + std::to_string(mbs));
        const BatchWindows grid(stream, seq_len, mbs, m, dp);
        const BatchWindows single_rank(stream, seq_len, mbs, m * dp, 1);
        const int global = mbs * m * dp;
        ASSERT_EQ(grid.global_batch_sequences(), global);
        ASSERT_EQ(grid.windows(), 7);
        for (int step = 1; step <= 4; ++step) {
          const GlobalBatch got = gather(grid, step, seq_len, mbs, m, dp);
          const GlobalBatch reference = gather(single_rank, step, seq_len, mbs, m * dp, 1);
          EXPECT_EQ(got.inputs, reference.inputs) << "step " << step;
          EXPECT_EQ(got.targets, reference.targets) << "step " << step;
          for (int j = 0; j < global; ++j) {
            const int window = ((step - 1) * global + j) % 7;
            for (int t = 0; t < seq_len; ++t) {
              ASSERT_EQ(got.inputs[j * seq_len + t], window * seq_len + t) << "step " << step << " j " << j;
              ASSERT_EQ(got.targets[j * seq_len + t], window * seq_len + t + 1) << "step " << step << " j " << j;
            }
          }
        }
      }
    }
  }
}

TEST(BatchWindows, WrapsAroundModuloWindowCount) {
  const int seq_len = 3;
  const BatchWindows windows(counting_tokens(3 * seq_len + 1), seq_len, 2, 1, 1);  // N = 3, G = 2
  const int expected_first_window[] = {0, 2, 1, 0};                               // windows 0 1 | 2 0 | 1 2 | 0 1
  for (int step = 1; step <= 4; ++step) {
    std::vector<std::int32_t> inputs(2 * seq_len), targets(2 * seq_len);
    windows.fill(step, 0, 0, inputs.data(), targets.data());
    EXPECT_EQ(inputs[0], expected_first_window[step - 1] * seq_len) << "step " << step;
    EXPECT_EQ(inputs[seq_len], (expected_first_window[step - 1] + 1) % 3 * seq_len) << "step " << step;
  }
}

TEST(BatchWindows, RejectsRanksAndStepsOutsideTheGrid) {
  const BatchWindows windows(counting_tokens(100), 4, 1, 2, 2);
  std::vector<std::int32_t> inputs(4), targets(4);
  EXPECT_THROW(windows.fill(0, 0, 0, inputs.data(), targets.data()), std::out_of_range);
  EXPECT_THROW(windows.fill(1, 2, 0, inputs.data(), targets.data()), std::out_of_range);
  EXPECT_THROW(windows.fill(1, 0, 2, inputs.data(), targets.data()), std::out_of_range);
}

}  // namespace
}  // namespace trident
