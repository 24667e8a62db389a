#include "kernels/copy.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "gradient_check.hpp"

namespace trident {
namespace {

using namespace testing;

// zero_floats stores 16 bytes at a time from the first 16-byte boundary: whatever the start's
// alignment and the length, exactly [first, first + n) becomes zero and its neighbours keep their values.
TEST(ZeroFloats, ZeroesExactlyTheRangeAtEveryAlignmentAndLength) {
  constexpr int size = 1100;
  for (int first = 0; first < 4; ++first) {
    for (int n : {0, 1, 2, 3, 4, 5, 7, 8, 9, 1001}) {
      const FloatBuffer buffer = random_buffer(size, 7);
      const std::vector<float> before = to_host(buffer);
      zero_floats(buffer.data() + first, n);
      const std::vector<float> after = to_host(buffer);
      for (int i = 0; i < size; ++i) {
        const bool inside = i >= first && i < first + n;
        ASSERT_EQ(after[i], inside ? 0.0f : before[i]) << "first " << first << ", n " << n << ", element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace trident
