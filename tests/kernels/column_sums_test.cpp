// add_rows_into against a plain host loop, in shapes that take every path of both builds: a full
// column block and a partial one (CPU), several row chunks and a partial one (GPU), a destination
// that is the same for every row, one that changes from row to row with repeats, and skipped rows.
#include "kernels/column_sums.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "gradient_check.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int rows = 2 * kRowChunk + 5, columns = kColumnBlock + 14, targets = 3;

// Every row adds a into `totals` and 2a into row (r / 3) % 3 of `scattered`, skipping every seventh
// row there. (A free function: CUDA allows no device lambda inside a test body, a private member.)
void add_test_rows(const FloatBuffer& a, const FloatBuffer& totals, const FloatBuffer& scattered) {
  float* const total_row = totals.data();
  float* const scattered_rows = scattered.data();
  const float* const values = a.data();
  add_rows_into<2>(
      "test", rows, columns,
      KOKKOS_LAMBDA(int r) {
        float* row = r % 7 == 6 ? nullptr : scattered_rows + static_cast<long>((r / 3) % targets) * columns;
        return Destinations<2>{total_row, row};
      },
      KOKKOS_LAMBDA(int r, int c) {
        const float v = values[static_cast<long>(r) * columns + c];
        return Terms<2>{v, 2.0f * v};
      });
}

TEST(ColumnSums, AddsEveryRowIntoItsDestinations) {
  const FloatBuffer a = random_buffer(static_cast<std::size_t>(rows) * columns, 1);
  const FloatBuffer totals = random_buffer(columns, 2);
  const FloatBuffer scattered = random_buffer(targets * columns, 3);
  const std::vector<float> host_a = to_host(a), totals_before = to_host(totals);
  const std::vector<float> scattered_before = to_host(scattered);
  add_test_rows(a, totals, scattered);

  std::vector<double> want_totals(totals_before.begin(), totals_before.end());
  std::vector<double> want_scattered(scattered_before.begin(), scattered_before.end());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < columns; ++c) {
      const double v = host_a[static_cast<std::size_t>(r) * columns + c];
      want_totals[c] += v;
      if (r % 7 != 6) want_scattered[static_cast<std::size_t>((r / 3) % targets) * columns + c] += 2.0 * v;
    }
  const std::vector<float> got_totals = to_host(totals), got_scattered = to_host(scattered);
  for (int c = 0; c < columns; ++c) EXPECT_NEAR(got_totals[c], want_totals[c], 1e-4) << "column " << c;
  for (int i = 0; i < targets * columns; ++i) EXPECT_NEAR(got_scattered[i], want_scattered[i], 1e-4) << "element " << i;
}

}  // namespace
}  // namespace trident
