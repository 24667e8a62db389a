// The data each (dp rank, micro-batch) receives, against DESIGN.md "Parallel semantics".
// Tokens are 0, 1, 2, ... so a window's first input id tells which window it is.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "data/batch_windows.hpp"

namespace trident {
namespace {

TokenStream counting_tokens(std::int64_t count) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(count));
  std::iota(tokens.begin(), tokens.end(), 0);
  return TokenStream({std::make_shared<MemoryTokens>(std::move(tokens), "counting")}, 1 << 30, "test");
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
// Shuffled or not: the permutation depends on the sequence's index in the run only.
class EveryGrid : public ::testing::TestWithParam<bool> {};

TEST_P(EveryGrid, SeesTheSameGlobalBatch) {
  const bool shuffle = GetParam();
  const int seq_len = 5;
  const TokenStream stream = counting_tokens(7 * seq_len + 3);  // N = 7: steps wrap around soon
  const WindowOrder order(7, shuffle, 99);
  for (int dp : {1, 2, 4}) {
    for (int m : {1, 3}) {
      for (int mbs : {1, 2}) {
        SCOPED_TRACE("dp " + std::to_string(dp) + " m " + std::to_string(m) + " mbs " + std::to_string(mbs));
        const BatchWindows grid(stream, seq_len, mbs, m, dp, shuffle, 99);
        const BatchWindows single_rank(stream, seq_len, mbs, m * dp, 1, shuffle, 99);
        const int global = mbs * m * dp;
        ASSERT_EQ(grid.global_batch_sequences(), global);
        ASSERT_EQ(grid.windows(), 7);
        for (int step = 1; step <= 4; ++step) {
          const GlobalBatch got = gather(grid, step, seq_len, mbs, m, dp);
          const GlobalBatch reference = gather(single_rank, step, seq_len, mbs, m * dp, 1);
          EXPECT_EQ(got.inputs, reference.inputs) << "step " << step;
          EXPECT_EQ(got.targets, reference.targets) << "step " << step;
          for (int j = 0; j < global; ++j) {
            const auto window = static_cast<int>(order.window((step - 1) * global + j));
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

INSTANTIATE_TEST_SUITE_P(BatchWindows, EveryGrid, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Shuffled" : "InOrder"; });

TEST(WindowOrder, InOrderIsTheIdentityModuloN) {
  const WindowOrder order(7, false, 5);
  for (std::int64_t g = 0; g < 30; ++g) EXPECT_EQ(order.window(g), g % 7);
  EXPECT_EQ(order.epoch(13), 1);
}

// Each epoch reads every window exactly once, in an order that changes with the epoch and seed.
TEST(WindowOrder, ShuffledEpochsArePermutations) {
  for (std::int64_t n : {1, 2, 3, 5, 16, 17, 100, 1000, 4099}) {
    SCOPED_TRACE("N = " + std::to_string(n));
    const WindowOrder order(n, true, 1234);
    std::vector<std::vector<std::int64_t>> epochs;
    for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<std::int64_t> windows;
      for (std::int64_t i = 0; i < n; ++i) windows.push_back(order.window(epoch * n + i));
      std::vector<std::int64_t> sorted = windows;
      std::ranges::sort(sorted);
      for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i) << "epoch " << epoch << " is not a permutation";
      epochs.push_back(windows);
    }
    if (n >= 16) {
      EXPECT_NE(epochs[0], epochs[1]);
      std::vector<std::int64_t> identity(static_cast<std::size_t>(n));
      std::iota(identity.begin(), identity.end(), 0);
      EXPECT_NE(epochs[0], identity);
      const WindowOrder other_seed(n, true, 1235);
      std::int64_t same = 0;
      for (std::int64_t i = 0; i < n; ++i) same += other_seed.window(i) == epochs[0][static_cast<std::size_t>(i)];
      EXPECT_LT(same, n / 4 + 2) << "another seed should give another order";
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
