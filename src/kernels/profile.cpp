#include "kernels/profile.hpp"

#include <Kokkos_Core.hpp>
#include <string>

namespace trident {

namespace {
KernelCost declared_cost;  // launches are queued by one host thread per rank
}  // namespace

void declare_kernel_cost(const KernelCost& cost) { declared_cost = cost; }

KernelCost take_kernel_cost() {
  const KernelCost cost = declared_cost;
  declared_cost = {};
  return cost;
}

ProfileRegion::ProfileRegion(const char* name) : open_(Kokkos::Tools::profileLibraryLoaded()) {
  if (open_) Kokkos::Profiling::pushRegion(name);
}

ProfileRegion::~ProfileRegion() {
  if (open_) Kokkos::Profiling::popRegion();
}

ForeignKernel::ForeignKernel(const char* label) : open_(Kokkos::Tools::profileLibraryLoaded()) {
  if (open_) Kokkos::Profiling::beginParallelFor(label, 0, &id_);
}

ForeignKernel::~ForeignKernel() {
  if (open_) Kokkos::Profiling::endParallelFor(id_);
}

void wait_for_device(const char* why) {
  Kokkos::fence();
  note_host_wait(why);
}

void note_host_wait(const char* why) {
  if (Kokkos::Tools::profileLibraryLoaded()) Kokkos::Profiling::markEvent(std::string(kHostWaitEvent) + why);
}

}  // namespace trident
