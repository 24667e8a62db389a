// Walks the tensors that a held range of the flat buffer covers, so that per-tensor rules (weight
// decay, TP sharding) apply to ranges that cut tensors.
#pragma once

#include <algorithm>
#include <cstddef>

#include "model/param_store.hpp"
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

}  // namespace trident
