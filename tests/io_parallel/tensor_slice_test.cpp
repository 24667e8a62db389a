// TensorSlice on its own (no MPI): the checksum adds up over any split and notices any change;
// validation names what does not fit.
#include <gtest/gtest.h>

#include "io_parallel_support.hpp"

namespace trident::io_parallel_test {
namespace {

TEST(TensorSlice, ChecksumOfPartsAddsUpToTheWhole) {
  const std::vector<std::int64_t> shape = {3, 4, 5};
  Held all = whole("t", shape);
  all.fill(7);
  // Two boxes per part, column-block style in the last dimension, over four parts of the rows.
  std::uint64_t sum_of_parts = 0;
  for (int r = 0; r < 3; ++r) {
    Held part_r("t", shape, {1, 4, 5},
                {SliceBox{{r, 0, 0}, {0, 0, 0}, {1, 4, 2}}, SliceBox{{r, 0, 2}, {0, 0, 2}, {1, 4, 3}}});
    part_r.fill(7);
    sum_of_parts += slice_checksum(part_r.slice());
  }
  EXPECT_EQ(sum_of_parts, slice_checksum(all.slice()));
}

TEST(TensorSlice, ChecksumSeesOneChangedBitAndSwappedValues) {
  Held a = whole("t", {2, 8});
  a.fill(1);
  const std::uint64_t original = slice_checksum(a.slice());
  std::uint32_t bits;
  std::memcpy(&bits, &a.storage()[5], sizeof bits);
  bits ^= 1u;
  std::memcpy(&a.storage()[5], &bits, sizeof bits);
  EXPECT_NE(original, slice_checksum(a.slice()));

  Held b = whole("t", {2, 8});
  b.fill(1);
  std::swap(b.storage()[3], b.storage()[12]);
  EXPECT_NE(original, slice_checksum(b.slice()));
}

TEST(TensorSlice, ValidationNamesTheTensorAndTheProblem) {
  Held outside("model/x", {4, 6}, {4, 6}, {SliceBox{{2, 0}, {0, 0}, {3, 6}}});
  const std::string message = message_of<std::invalid_argument>([&] { validate_slice(outside.slice()); });
  EXPECT_NE(message.find("model/x"), std::string::npos) << message;
  EXPECT_NE(message.find("does not fit"), std::string::npos) << message;

  Held wrong_rank("model/y", {4, 6}, {4, 6}, {SliceBox{{0}, {0}, {4}}});
  EXPECT_THROW(validate_slice(wrong_rank.slice()), std::invalid_argument);

  TensorSlice no_data{"model/z", {4}, {4}, nullptr, {SliceBox{{0}, {0}, {4}}}};
  EXPECT_THROW(validate_slice(no_data), std::invalid_argument);

  TensorSlice empty_box_no_data{"model/z", {4}, {0}, nullptr, {SliceBox{{4}, {0}, {0}}}};
  EXPECT_NO_THROW(validate_slice(empty_box_no_data));
  TensorSlice holds_nothing{"model/w", {4, 6}, {}, nullptr, {}};  // no local array to describe
  EXPECT_NO_THROW(validate_slice(holds_nothing));
}

}  // namespace
}  // namespace trident::io_parallel_test
