#include "optim/element_runs.hpp"

#include <algorithm>
#include <string>

namespace trident {

void ElementRuns::add(const ParamTensor& tensor, std::size_t offset, std::size_t count, std::size_t local) {
  elements_ += count;
  for (std::size_t done = 0; done < count; done += kRunElements) {
    const auto run = static_cast<int>(std::min<std::size_t>(kRunElements, count - done));
    host_.push_back({offset + done, local + done, run, tensor.weight_decay ? 1 : 0});
  }
}

void ElementRuns::upload() {
  device_ = Kokkos::View<ElementRun*, MemSpace>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("element_runs")),
                                                host_.size());
  const Kokkos::View<const ElementRun*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> from(host_.data(),
                                                                                                      host_.size());
  Kokkos::deep_copy(device_, from);
}

ElementRuns whole_tensors(const ParamStore& params) {
  ElementRuns runs;
  for (const ParamTensor& tensor : params.tensors()) runs.add(tensor, tensor.offset, tensor.size, tensor.offset);
  runs.upload();
  return runs;
}

}  // namespace trident
