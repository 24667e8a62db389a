// Walks the tensors that a held range of the flat buffer covers, so that per-tensor rules (weight
// decay, TP sharding) apply to ranges that cut tensors.
#pragma once

#include <algorithm>
#include <cstddef>

#include "dp/gradient_sync.hpp"
#include "model/param_store.hpp"
#include "optim/element_runs.hpp"
#include "plan/buckets.hpp"

namespace trident {

// Calls fn(tensor, offset, count, local) for each tensor overlapping `range`, with the overlap as
// flat elements [offset, offset + count) held at [local, local + count). The store's tensors lie
// in offset order, as ParamStore::add appends them.
template <class Fn>
void for_each_tensor_piece(const ParamStore& params, const HeldRange& range, Fn&& fn) {
  const auto& tensors = params.tensors();
  const std::size_t end = range.offset + range.count;
  auto tensor = std::partition_point(tensors.begin(), tensors.end(), [&](const ParamTensor& t) {
    return t.offset + t.size <= range.offset;
  });
  for (; tensor != tensors.end() && tensor->offset < end; ++tensor) {
    const std::size_t begin = std::max(tensor->offset, range.offset);
    const std::size_t stop = std::min(tensor->offset + tensor->size, end);
    if (stop > begin) fn(*tensor, begin, stop - begin, range.local + (begin - range.offset));
  }
}

// The pieces of tensors whose reduced gradients `sync` leaves on this rank (a piece may cut a
// tensor: per-tensor rules follow the tensor each element belongs to), those of the tensors `keep`
// accepts, as element runs at their places in sync.reduced_grads() (uploaded).
template <class Keep>
ElementRuns held_pieces(const GradientSync& sync, Keep&& keep) {
  ElementRuns runs;
  for (const HeldRange& range : sync.held_ranges())
    for_each_tensor_piece(sync.params(), range,
                          [&](const ParamTensor& tensor, std::size_t offset, std::size_t count, std::size_t local) {
                            if (keep(tensor)) runs.add(tensor, offset, count, local);
                          });
  runs.upload();
  return runs;
}

}  // namespace trident
