// Shared pieces of the data-parallel tests: the world as the dp group, a small store shaped like a
// one-block model, and gradients whose sums over ranks are exact in float in any order (multiples
// of 1/16 no larger than 1/2), so reduced results can be compared for equality.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <random>
#include <utility>
#include <vector>

#include "model/param_store.hpp"
#include "param_fixture.hpp"
#include "mpi_world.hpp"

namespace trident::dp_test {

using optim_test::from_host;
using optim_test::to_host;

using testing_mpi::world_rank;
using testing_mpi::world_size;

// count device floats from `data` (e.g. a GradientSync's reduced gradients) on the host.
inline std::vector<float> host_copy(const float* data, std::size_t count) {
  std::vector<float> host(count);
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  Kokkos::deep_copy(Kokkos::View<float*, Kokkos::HostSpace, Unmanaged>(host.data(), count),
                    Kokkos::View<const float*, MemSpace, Unmanaged>(data, count));
  return host;
}

// 140 elements: decayed 2-D weights (wte, wpe, c_attn) between undecayed 1-D tensors.
inline ParamStore one_block_store() {
  ParamStore params;
  params.add("wte.weight", {11, 4});
  params.add("wpe.weight", {5, 4});
  params.add("h.0.ln_1.weight", {4});
  params.add("h.0.ln_1.bias", {4});
  params.add("h.0.attn.c_attn.weight", {4, 12});
  params.add("h.0.attn.c_attn.bias", {12});
  params.add("ln_f.weight", {4});
  params.add("ln_f.bias", {4});
  params.allocate();
  return params;
}

// Rank `rank`'s gradient of flat element i at step `step`.
inline float rank_gradient(int rank, std::size_t i, int step) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<std::size_t>(step) * 3 + rank * 5) % 17) - 8) *
         0.0625f;
}

inline std::vector<float> rank_gradients(int rank, std::size_t count, int step) {
  std::vector<float> grads(count);
  for (std::size_t i = 0; i < count; ++i) grads[i] = rank_gradient(rank, i, step);
  return grads;
}

inline std::vector<float> summed_gradients(int ranks, std::size_t count, int step) {
  std::vector<float> sum(count, 0.0f);
  for (int rank = 0; rank < ranks; ++rank)
    for (std::size_t i = 0; i < count; ++i) sum[i] += rank_gradient(rank, i, step);
  return sum;
}

// [0, total) cut at random points into ranges listed in random order: how a caller other than
// Transformer::backward might report gradients as ready.
inline std::vector<std::pair<std::size_t, std::size_t>> shuffled_chunks(std::size_t total, unsigned seed) {
  std::mt19937 random(seed);
  std::vector<std::pair<std::size_t, std::size_t>> chunks;
  for (std::size_t offset = 0; offset < total;) {
    const std::size_t count = std::min(total - offset, std::size_t{1} + random() % 23);
    chunks.emplace_back(offset, count);
    offset += count;
  }
  std::shuffle(chunks.begin(), chunks.end(), random);
  return chunks;
}

}  // namespace trident::dp_test
