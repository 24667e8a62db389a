#include "io/tensor_slice.hpp"

#include <cstring>
#include <stdexcept>

namespace trident {

namespace {

// Row-major strides of `shape`, in elements.
std::vector<std::uint64_t> strides_of(const std::vector<std::int64_t>& shape) {
  std::vector<std::uint64_t> strides(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * static_cast<std::uint64_t>(shape[d]);
  return strides;
}

std::string box_problem(const SliceBox& box, const TensorSlice& slice) {
  const std::size_t rank = slice.global_shape.size();
  if (box.global_start.size() != rank || box.local_start.size() != rank || box.count.size() != rank)
    return "a box has " + std::to_string(box.global_start.size()) + "/" + std::to_string(box.local_start.size()) +
           "/" + std::to_string(box.count.size()) + " dimensions (global_start/local_start/count), the tensor " +
           std::to_string(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    const std::int64_t count = box.count[d];
    if (count < 0 || box.global_start[d] < 0 || box.local_start[d] < 0 ||
        box.global_start[d] + count > slice.global_shape[d] || box.local_start[d] + count > slice.local_shape[d])
      return "box global_start " + format_shape(box.global_start) + " local_start " + format_shape(box.local_start) +
             " count " + format_shape(box.count) + " does not fit global shape " + format_shape(slice.global_shape) +
             " and local shape " + format_shape(slice.local_shape);
  }
  return "";
}

}  // namespace

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t extent : shape) n *= extent;
  return n;
}

std::int64_t box_elements(const SliceBox& box) { return element_count(box.count); }

std::int64_t slice_elements(const TensorSlice& slice) {
  std::int64_t n = 0;
  for (const SliceBox& box : slice.boxes) n += box_elements(box);
  return n;
}

std::string format_shape(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

void validate_slice(const TensorSlice& slice) {
  const auto fail = [&](const std::string& problem) {
    throw std::invalid_argument("checkpoint tensor '" + slice.path + "': " + problem);
  };
  if (slice.global_shape.empty()) fail("0-D tensors are not supported");
  for (std::int64_t extent : slice.global_shape)
    if (extent < 0) fail("negative extent in global shape " + format_shape(slice.global_shape));
  if (slice.boxes.empty()) return;  // a rank that holds nothing needs no local array
  if (slice.local_shape.size() != slice.global_shape.size())
    fail("local shape " + format_shape(slice.local_shape) + " and global shape " + format_shape(slice.global_shape) +
         " differ in dimensions");
  for (const SliceBox& box : slice.boxes)
    if (const std::string problem = box_problem(box, slice); !problem.empty()) fail(problem);
  if (slice.data == nullptr && slice_elements(slice) > 0) fail("data is null but the boxes hold elements");
}

void for_each_row(const TensorSlice& slice, const RowVisitor& row) {
  const std::vector<std::uint64_t> global_strides = strides_of(slice.global_shape);
  const std::vector<std::uint64_t> local_strides = strides_of(slice.local_shape);
  const std::size_t rank = slice.global_shape.size();
  for (const SliceBox& box : slice.boxes) {
    if (box_elements(box) == 0) continue;
    std::vector<std::int64_t> at(rank - 1, 0);  // odometer over the box's rows: all dimensions but the last
    while (true) {
      std::uint64_t global = 0, local = 0;
      for (std::size_t d = 0; d < rank; ++d) {
        const std::int64_t offset = d + 1 < rank ? at[d] : 0;
        global += static_cast<std::uint64_t>(box.global_start[d] + offset) * global_strides[d];
        local += static_cast<std::uint64_t>(box.local_start[d] + offset) * local_strides[d];
      }
      row(global, local, box.count[rank - 1]);
      std::size_t d = rank - 1;
      while (d > 0 && ++at[d - 1] == box.count[d - 1]) at[--d] = 0;
      if (d == 0) break;
    }
  }
}

std::uint64_t slice_checksum(const TensorSlice& slice) {
  std::uint64_t sum = 0;
  for_each_row(slice, [&](std::uint64_t global, std::uint64_t local, std::int64_t length) {
    for (std::int64_t j = 0; j < length; ++j) {
      std::uint32_t bits;
      std::memcpy(&bits, slice.data + local + j, sizeof bits);
      sum += mix64(global + static_cast<std::uint64_t>(j), bits);
    }
  });
  return sum;
}

}  // namespace trident
