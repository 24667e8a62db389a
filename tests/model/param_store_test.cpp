// Tensor-parallel slices of the parameter store: local shapes, and the map from a local element to
// its global (HF-shaped) index for every kind of split the model uses.
#include "model/param_store.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace trident {
namespace {

constexpr std::int64_t C = 8, V = 37;

// One tensor of each kind, as the model declares them.
ParamStore store(int tp_rank, int tp_size) {
  ParamStore params(tp_rank, tp_size);
  params.add("wte.weight", {V, C}, 0);                 // vocab-parallel rows, padded
  params.add("h.0.attn.c_attn.weight", {C, 3 * C}, 1, 3);  // columns of each of q, k, v
  params.add("h.0.attn.c_attn.bias", {3 * C}, 0, 3);
  params.add("h.0.attn.c_proj.weight", {C, C}, 0);     // row-parallel
  params.add("h.0.mlp.c_fc.weight", {C, 4 * C}, 1);     // column-parallel
  params.add("h.0.mlp.c_fc.bias", {4 * C}, 0);
  params.add("h.0.ln_1.weight", {C});                  // replicated
  params.allocate();
  return params;
}

std::int64_t elements(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

// Over the ranks of a group, every global element of a sharded tensor is held exactly once (of a
// replicated one, by every rank), and the only local elements without one are wte's padding rows.
TEST(ParamStore, SlicesOfAGroupHoldEveryGlobalElementOnce) {
  for (int tp : {1, 2, 4}) {
    const std::int64_t padded_vocab = (V + tp - 1) / tp * tp;
    const ParamStore unsharded = store(0, 1);
    for (const ParamTensor& whole : unsharded.tensors()) {
      std::vector<int> held(elements(whole.global_shape), 0);
      std::int64_t padding = 0;
      for (int rank = 0; rank < tp; ++rank) {
        const ParamStore params = store(rank, tp);
        const ParamTensor& slice = params.find(whole.name);
        for (std::int64_t i = 0; i < static_cast<std::int64_t>(slice.size); ++i) {
          const std::int64_t global = global_index(slice, i, rank, tp);
          if (global < 0)
            ++padding;
          else
            ++held.at(global);
        }
      }
      const int holders = whole.tp_sharded() ? 1 : tp;
      EXPECT_TRUE(std::all_of(held.begin(), held.end(), [&](int n) { return n == holders; })) << whole.name << " tp " << tp;
      EXPECT_EQ(padding, whole.name == "wte.weight" ? (padded_vocab - V) * C : 0) << whole.name << " tp " << tp;
    }
  }
}

// The boxes checkpoints read and write name the same elements as global_index: walking each box
// maps every local element inside it to its global index, and the boxes hold all real elements.
TEST(ParamStore, ShardBoxesAgreeWithGlobalIndex) {
  for (int tp : {1, 2, 3, 4}) {
    for (int rank = 0; rank < tp; ++rank) {
      const ParamStore params = store(rank, tp);
      for (const ParamTensor& slice : params.tensors()) {
        std::int64_t covered = 0, real = 0;
        for (std::int64_t i = 0; i < static_cast<std::int64_t>(slice.size); ++i) real += global_index(slice, i, rank, tp) >= 0;
        for (const ShardBox& box : shard_boxes(slice, rank, tp)) {
          const std::int64_t n = elements(box.count);
          for (std::int64_t k = 0; k < n; ++k) {
            // k-th element of the box, row-major, as local and global flat indices.
            std::int64_t rest = k, local = 0, global = 0, local_stride = 1, global_stride = 1;
            for (int d = static_cast<int>(box.count.size()) - 1; d >= 0; --d) {
              const std::int64_t i = rest % box.count[d];
              rest /= box.count[d];
              local += (box.local_start[d] + i) * local_stride;
              global += (box.global_start[d] + i) * global_stride;
              local_stride *= slice.local_shape[d];
              global_stride *= slice.global_shape[d];
            }
            ASSERT_EQ(global_index(slice, local, rank, tp), global) << slice.name << " tp " << tp << " rank " << rank;
          }
          covered += n;
        }
        EXPECT_EQ(covered, real) << slice.name << " tp " << tp << " rank " << rank;
      }
    }
  }
}

TEST(ParamStore, LocalShapesAndFlags) {
  const ParamStore params = store(1, 4);
  auto local = [&](const char* name) { return params.find(name).local_shape; };
  EXPECT_EQ(local("wte.weight"), (std::vector<std::int64_t>{10, C}));  // ⌈37 / 4⌉ rows
  EXPECT_EQ(local("h.0.attn.c_attn.weight"), (std::vector<std::int64_t>{C, 3 * C / 4}));
  EXPECT_EQ(local("h.0.attn.c_attn.bias"), (std::vector<std::int64_t>{3 * C / 4}));
  EXPECT_EQ(local("h.0.attn.c_proj.weight"), (std::vector<std::int64_t>{C / 4, C}));
  EXPECT_EQ(local("h.0.mlp.c_fc.weight"), (std::vector<std::int64_t>{C, C}));
  EXPECT_EQ(local("h.0.ln_1.weight"), (std::vector<std::int64_t>{C}));
  EXPECT_EQ(params.find("wte.weight").global_shape, (std::vector<std::int64_t>{V, C}));
  EXPECT_EQ(params.find("h.0.mlp.c_fc.weight").size, static_cast<std::size_t>(C * C));
  EXPECT_TRUE(params.find("h.0.attn.c_proj.weight").tp_sharded());
  EXPECT_FALSE(params.find("h.0.ln_1.weight").tp_sharded());
  EXPECT_TRUE(params.find("h.0.attn.c_proj.weight").weight_decay);
  EXPECT_FALSE(params.find("h.0.mlp.c_fc.bias").weight_decay);
  std::size_t offset = 0;
  for (const ParamTensor& tensor : params.tensors()) {
    EXPECT_EQ(tensor.offset, offset) << tensor.name;
    offset += tensor.size;
  }
  EXPECT_EQ(params.total_size(), offset);
}

// Rank 1 of 2 with C = 8: its heads are columns 4..7 of each of q, k and v.
TEST(ParamStore, GlobalIndexOfEachSplit) {
  const ParamStore params = store(1, 2);
  auto global = [&](const char* name, std::int64_t local) { return global_index(params.find(name), local, 1, 2); };
  const std::int64_t qkv_local = 3 * C / 2;  // 12 local columns: q 4..7, k 12..15, v 20..23
  EXPECT_EQ(global("h.0.attn.c_attn.weight", 2 * qkv_local + 0), 2 * 3 * C + 4);       // row 2, q column 4
  EXPECT_EQ(global("h.0.attn.c_attn.weight", 2 * qkv_local + 5), 2 * 3 * C + C + 5);   // row 2, k column 5
  EXPECT_EQ(global("h.0.attn.c_attn.weight", 2 * qkv_local + 11), 2 * 3 * C + 2 * C + 7);  // row 2, v column 7
  EXPECT_EQ(global("h.0.attn.c_attn.bias", 4), C + 4);
  EXPECT_EQ(global("h.0.attn.c_proj.weight", 0 * C + 3), 4 * C + 3);  // local row 0 is global row 4
  EXPECT_EQ(global("h.0.mlp.c_fc.weight", 1 * 2 * C + 3), 1 * 4 * C + 2 * C + 3);  // row 1, column 16 + 3
  EXPECT_EQ(global("h.0.mlp.c_fc.bias", 3), 2 * C + 3);
  EXPECT_EQ(global("wte.weight", 17 * C + 2), 36 * C + 2);  // rows 19..37: local 17 is the last real id
  EXPECT_EQ(global("wte.weight", 18 * C + 2), -1);          // local 18 is padding row 37
  EXPECT_EQ(global("h.0.ln_1.weight", 5), 5);
}

TEST(ParamStore, RejectsImpossibleSplits) {
  ParamStore params(0, 2);
  EXPECT_THROW(params.add("odd", {C, 10}, 1, 3), std::logic_error);  // 10 columns in 3 blocks
  EXPECT_THROW(params.add("dim", {C}, 1), std::logic_error);
  EXPECT_THROW(ParamStore(2, 2), std::invalid_argument);
}

}  // namespace
}  // namespace trident
