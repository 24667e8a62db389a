// All parameters of the model in one flat device buffer (as llm.c), with one descriptor per
// tensor under its Hugging Face name (family/family.hpp's TensorSpec). Gradients use the same
// layout in a second buffer.
//
// Under tensor parallelism each rank stores only its slice of a sharded tensor. A descriptor keeps
// both the global (HF, unsharded, unpadded) shape and the local one, and how the tensor is split,
// so that any local element maps to its global index: initialisation, checkpoints and tests work
// on global indices and are therefore the same on every grid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "family/family.hpp"
#include "kernels/device.hpp"

namespace trident {

class Comm;

struct ParamTensor {
  std::string name;                        // HF name without "transformer." / "model.": "h.0.attn.c_attn.weight"
  std::vector<std::int64_t> global_shape;  // HF shape (Conv1D weights are [in, out]), unsharded and unpadded
  std::vector<std::int64_t> local_shape;   // this TP rank's slice of it
  // Dimension split across the TP ranks (-1: every rank holds the whole tensor). That dimension is
  // made of shard_blocks equal blocks (3 for c_attn's q|k|v), each split evenly across the ranks;
  // a block whose length does not divide by the TP size is padded at its end (only wte's rows are).
  int shard_dim = -1;
  int shard_blocks = 1;
  std::size_t offset = 0;     // first element in ParamStore::values / grads
  std::size_t size = 0;       // number of local elements
  bool weight_decay = false;  // AdamW decay applies to 2-D weights only
  TensorInit init = TensorInit::normal;  // how init_parameters fills it (model/init.hpp)
  int expert = -1;  // a mixture's expert it belongs to (-1: none): split over parallel.ep, not replicated

  bool tp_sharded() const { return shard_dim >= 0; }
  float* in(const FloatBuffer& buffer) const { return buffer.data() + offset; }
};

// Index in the global (HF-shaped, row-major) tensor of local element `local_index` held by TP rank
// tp_rank of tp_size, or -1 for a padding element (a wte row past the real vocabulary).
std::int64_t global_index(const ParamTensor& tensor, std::int64_t local_index, int tp_rank, int tp_size);

// The part of a tensor's global (HF) shape that TP rank tp_rank holds, as boxes: elements
// [global_start, global_start + count) of the global tensor sit at [local_start, local_start +
// count) of the rank's local slice (one box per shard block: q, k and v of c_attn are three; none
// for a block the rank holds only padding of). Checkpoints read and write these boxes.
struct ShardBox {
  std::vector<std::int64_t> global_start, local_start, count;
};
std::vector<ShardBox> shard_boxes(const ParamTensor& tensor, int tp_rank, int tp_size);

class ParamStore {
 public:
  // The slices of TP rank tp_rank of tp_size; the defaults hold whole tensors.
  explicit ParamStore(int tp_rank = 0, int tp_size = 1);

  // Appends a tensor descriptor; call allocate() once all are added. global_shape[shard_dim] must
  // divide into shard_blocks blocks.
  const ParamTensor& add(const TensorSpec& spec);
  const ParamTensor& add(std::string name, std::vector<std::int64_t> global_shape, int shard_dim = -1,
                         int shard_blocks = 1) {
    return add(TensorSpec{std::move(name), std::move(global_shape), shard_dim, shard_blocks});
  }
  void allocate();  // allocates values and grads (zeroed)

  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  const ParamTensor& find(const std::string& name) const;  // throws std::out_of_range
  const ParamTensor* try_find(const std::string& name) const;  // null when this store does not hold it
  std::size_t total_size() const { return total_; }
  int tp_rank() const { return tp_rank_; }
  int tp_size() const { return tp_size_; }

  FloatBuffer values;
  FloatBuffer grads;

  // Under train.precision = "bf16": a bf16 copy of `values` (nearest, ties to even) that the
  // products read in place of the weights (kernels/gemm.hpp, Bf16Copy). Whoever writes `values`
  // keeps it current: AdamW as it updates them, refresh_bf16_copy() after any other write
  // (initialisation, a checkpoint's load, ZeRO-1's all-gather).
  void keep_bf16_copy();           // allocates the copy and fills it
  std::uint16_t* bf16_copy() const;  // null when none is kept
  void refresh_bf16_copy();        // nothing when none is kept

 private:
  Bf16Buffer bf16_copy_;
  std::vector<ParamTensor> tensors_;
  std::size_t total_ = 0;
  int tp_rank_;
  int tp_size_;
};

// The whole HF-shaped tensor (global_shape, row-major) on every rank of `tp`, assembled from the
// slices of `tensor` in `buffer` (the store's values or grads). Collective over tp, whose ranks
// must be the TP ranks the store was built for.
void gather_full_tensor(const ParamTensor& tensor, const FloatBuffer& buffer, Comm& tp, std::vector<float>& out_global);

}  // namespace trident
