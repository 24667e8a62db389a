// Where tensors live and kernels run: chosen at build time by the Kokkos backend
// (Serial on Debian's CPU build, CUDA in the GPU build). Kernels are written once against these.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>

namespace trident {

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemSpace = ExecSpace::memory_space;

using FloatBuffer = Kokkos::View<float*, MemSpace>;
using IntBuffer = Kokkos::View<int*, MemSpace>;
using Bf16Buffer = Kokkos::View<std::uint16_t*, MemSpace>;  // bf16 bits (kernels/matmul_precision.hpp)
using HostFloatBuffer = FloatBuffer::HostMirror;
using HostIntBuffer = IntBuffer::HostMirror;

}  // namespace trident
