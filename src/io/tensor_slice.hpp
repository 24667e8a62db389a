// What one rank holds of a checkpoint tensor: boxes of the global (HF-shaped) tensor and where they
// lie in the rank's local array. The collective checkpoint writer and reader take these, so the
// trainer describes its TP / PP / DP slices and the file layout stays whole and unsharded.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace trident {

// One N-D box of a tensor: elements [global_start, global_start + count) of the global (HF) shape,
// held at [local_start, local_start + count) of this rank's local array (row-major in local_shape).
// All three have the tensor's rank (number of dimensions).
struct SliceBox {
  std::vector<std::int64_t> global_start, local_start, count;
};

// This rank's part of one checkpoint dataset. A rank's boxes must not overlap each other.
//
// Ordering requirement: HDF5 pairs the file and the memory selection element by element, each
// walked in the row-major order of its own dataspace. So the map from local to global positions
// must preserve row-major order: of two elements in the boxes, the one earlier in the local array
// is earlier in the global tensor. Row blocks satisfy it, and so do column blocks within rows held
// in the same left-to-right order (c_attn's q|k|v: global columns [.. q_r .. k_r .. v_r ..] held
// as local columns [q_r | k_r | v_r]), and the row pieces of a flat range of such a slice (a
// ZeRO-1 shard). A local array that stores blocks in another order than the file (local [k | q])
// or transposed does not: copy it into a local array in file order first.
struct TensorSlice {
  std::string path;                        // dataset, e.g. "model/h/0/attn/c_attn/weight", "optimizer/m/wte/weight"
  std::vector<std::int64_t> global_shape;  // shape of the dataset (at least one dimension)
  std::vector<std::int64_t> local_shape;   // this rank's local array, same number of dimensions (any if no boxes)
  float* data = nullptr;                   // host memory of local_shape (read into / written from)
  std::vector<SliceBox> boxes;             // what this rank writes (or reads); empty: nothing
};

std::int64_t element_count(const std::vector<std::int64_t>& shape);  // 1 for a 0-D shape
std::int64_t box_elements(const SliceBox& box);                      // 0 for an empty box
std::int64_t slice_elements(const TensorSlice& slice);               // over all its boxes
std::string format_shape(const std::vector<std::int64_t>& shape);    // "[4, 6]"

// Throws std::invalid_argument naming slice.path when a box does not fit the global or the local
// shape, dimensions disagree, the global shape is 0-D or data is null while the boxes hold elements.
void validate_slice(const TensorSlice& slice);

// The term one element contributes to a dataset's checksum: a bijective mix of (index * odd
// constant + float bits), so changing any single element always changes the sum, and swapped
// values at different indices change it too (short of a 2^-64 coincidence).
inline std::uint64_t mix64(std::uint64_t global_index, std::uint32_t float_bits) {
  std::uint64_t x = global_index * 0x9E3779B97F4A7C15ull + float_bits;
  x ^= x >> 30;  // splitmix64's finalizer: each step is invertible
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// Calls row(global, local, length) for each row of each box (its run along the last dimension,
// contiguous in both arrays): the flat index of the row's first element in the global tensor and
// in the local array, and its length.
using RowVisitor = std::function<void(std::uint64_t global, std::uint64_t local, std::int64_t length)>;
void for_each_row(const TensorSlice& slice, const RowVisitor& row);

// Sum (mod 2^64) of mix64(global flat index, bits) over the elements of the slice's boxes. The
// sum is order-independent, so the sums of ranks holding disjoint boxes add up to the checksum of
// the whole dataset however it was split.
std::uint64_t slice_checksum(const TensorSlice& slice);

}  // namespace trident
