#include "model/param_store.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <stdexcept>

#include "comm/comm.hpp"
#include "kernels/matmul_precision.hpp"
#include "kernels/profile.hpp"

namespace trident {

namespace {

std::int64_t product(const std::vector<std::int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

// Length of one block of the sharded dimension, globally and on one rank (padding included).
struct ShardBlock {
  std::int64_t global, local;
  ShardBlock(const ParamTensor& tensor, int tp_size)
      : global(tensor.global_shape[tensor.shard_dim] / tensor.shard_blocks),
        local((global + tp_size - 1) / tp_size) {}
};

}  // namespace

std::int64_t global_index(const ParamTensor& tensor, std::int64_t local_index, int tp_rank, int tp_size) {
  if (!tensor.tp_sharded()) return local_index;
  const ShardBlock block(tensor, tp_size);
  // Peel the row-major local index from the last dimension to the first, rebuilding it globally.
  std::int64_t global = 0, global_stride = 1;
  for (int d = static_cast<int>(tensor.local_shape.size()) - 1; d >= 0; --d) {
    std::int64_t i = local_index % tensor.local_shape[d];
    local_index /= tensor.local_shape[d];
    if (d == tensor.shard_dim) {
      const std::int64_t within_block = tp_rank * block.local + i % block.local;
      if (within_block >= block.global) return -1;
      i = i / block.local * block.global + within_block;
    }
    global += i * global_stride;
    global_stride *= tensor.global_shape[d];
  }
  return global;
}

std::vector<ShardBox> shard_boxes(const ParamTensor& tensor, int tp_rank, int tp_size) {
  ShardBox whole{std::vector<std::int64_t>(tensor.global_shape.size(), 0),
                 std::vector<std::int64_t>(tensor.global_shape.size(), 0), tensor.global_shape};
  if (!tensor.tp_sharded()) return {whole};
  const ShardBlock block(tensor, tp_size);
  const int d = tensor.shard_dim;
  std::vector<ShardBox> boxes;
  for (int b = 0; b < tensor.shard_blocks; ++b) {
    const std::int64_t first = tp_rank * block.local;  // within the block
    const std::int64_t count = std::min(block.local, block.global - first);
    if (count <= 0) continue;  // this rank holds only padding of the block
    ShardBox box = whole;
    box.global_start[d] = b * block.global + first;
    box.local_start[d] = b * block.local;
    box.count[d] = count;
    boxes.push_back(std::move(box));
  }
  return boxes;
}

ParamStore::ParamStore(int tp_rank, int tp_size) : tp_rank_(tp_rank), tp_size_(tp_size) {
  if (tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size)
    throw std::invalid_argument("ParamStore: TP rank " + std::to_string(tp_rank) + " of " + std::to_string(tp_size));
}

const ParamTensor& ParamStore::add(const TensorSpec& spec) {
  if (values.size() != 0) throw std::logic_error("ParamStore::add after allocate(): " + spec.name);
  ParamTensor tensor;
  tensor.name = spec.name;
  tensor.global_shape = spec.shape;
  tensor.local_shape = tensor.global_shape;
  const int shard_dim = spec.shard_dim, shard_blocks = spec.shard_blocks;
  tensor.shard_dim = shard_dim;
  tensor.shard_blocks = shard_blocks;
  tensor.init = spec.init;
  tensor.expert = spec.expert;
  if (tensor.tp_sharded()) {
    if (shard_dim >= static_cast<int>(tensor.global_shape.size()) || shard_blocks < 1 ||
        tensor.global_shape[shard_dim] % shard_blocks != 0)
      throw std::logic_error("ParamStore::add: " + tensor.name + " cannot be split in " +
                             std::to_string(shard_blocks) + " blocks along dimension " + std::to_string(shard_dim));
    tensor.local_shape[shard_dim] = shard_blocks * ShardBlock(tensor, tp_size_).local;
  }
  tensor.size = static_cast<std::size_t>(product(tensor.local_shape));
  tensor.weight_decay = tensor.global_shape.size() == 2;
  tensor.offset = total_;
  total_ += tensor.size;
  tensors_.push_back(std::move(tensor));
  return tensors_.back();
}

void ParamStore::allocate() {
  values = FloatBuffer("params", total_);
  grads = FloatBuffer("grads", total_);
}

void ParamStore::keep_bf16_copy() {
  bf16_copy_ = Bf16Buffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("params_bf16")), total_);
  refresh_bf16_copy();
}

std::uint16_t* ParamStore::bf16_copy() const { return bf16_copy_.data(); }

void ParamStore::refresh_bf16_copy() {
  if (bf16_copy_.extent(0) == 0) return;
  const auto from = values;
  const auto to = bf16_copy_;
  declare_kernel_cost(KernelCost::of_floats(static_cast<double>(total_), 0.5 * total_));
  Kokkos::parallel_for("params_to_bf16", Kokkos::RangePolicy<ExecSpace>(0, total_),
                       KOKKOS_LAMBDA(std::size_t i) { to(i) = bf16_bits(from(i)); });
}

const ParamTensor* ParamStore::try_find(const std::string& name) const {
  for (const auto& tensor : tensors_)
    if (tensor.name == name) return &tensor;
  return nullptr;
}

const ParamTensor& ParamStore::find(const std::string& name) const {
  if (const ParamTensor* tensor = try_find(name)) return *tensor;
  throw std::out_of_range("no parameter named " + name);
}

void gather_full_tensor(const ParamTensor& tensor, const FloatBuffer& buffer, Comm& tp, std::vector<float>& out_global) {
  using Unmanaged = Kokkos::View<const float*, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const Unmanaged local(tensor.in(buffer), tensor.size);
  out_global.resize(static_cast<std::size_t>(product(tensor.global_shape)));
  if (!tensor.tp_sharded()) {
    Kokkos::deep_copy(Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                          out_global.data(), out_global.size()),
                      local);
    return;
  }
  const FloatBuffer slices(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("gathered_slices")),
                           tensor.size * tp.size());
  tp.all_gather(local.data(), slices.data(), tensor.size);
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), slices);
  for (int rank = 0; rank < tp.size(); ++rank)
    for (std::size_t i = 0; i < tensor.size; ++i) {
      const std::int64_t global = global_index(tensor, static_cast<std::int64_t>(i), rank, tp.size());
      if (global >= 0) out_global[global] = host(rank * tensor.size + i);
    }
}

}  // namespace trident
