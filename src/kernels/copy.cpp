#include "kernels/copy.hpp"

#include "kernels/device.hpp"

namespace trident {

namespace {

template <class T>
void copy_unmanaged(T* dst, const T* src, std::size_t n) {
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  Kokkos::deep_copy(Kokkos::View<T*, MemSpace, Unmanaged>(dst, n), Kokkos::View<const T*, MemSpace, Unmanaged>(src, n));
}

}  // namespace

void copy_floats(float* dst, const float* src, std::size_t n) { copy_unmanaged(dst, src, n); }
void copy_ints(int* dst, const int* src, std::size_t n) { copy_unmanaged(dst, src, n); }
void zero_floats(float* dst, std::size_t n) {
  Kokkos::deep_copy(Kokkos::View<float*, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(dst, n), 0.0f);
}

}  // namespace trident
