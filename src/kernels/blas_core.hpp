// OpenBLAS's kernels for this CPU. A DYNAMIC_ARCH OpenBLAS picks its kernels from the processor's
// family and model; on a virtual machine that reports a generic model ("Intel(R) Xeon(R)
// Processor") OpenBLAS 0.3.21 can fall back to its SSE3 `Prescott` kernels although the CPU's flags
// offer AVX-512, and every product runs up to 5× slower. OpenBLAS reads OPENBLAS_CORETYPE only as
// it loads, so a program that wants other kernels must start again with it set: before MPI,
// Kokkos or anything else starts, choose_blas_core_or_restart() does that when OpenBLAS fell back
// below what the flags allow and the user did not choose a core, and blas_core_note() says so.
#pragma once

#include <set>
#include <string>
#include <string_view>

namespace trident {

// The widest vector class a core's kernels use: 1 SSE, 2 AVX, 3 AVX2 + FMA, 4 AVX-512; 0 when the
// name is not one of OpenBLAS's x86-64 cores (then trident leaves OpenBLAS's choice alone).
int blas_core_vector_class(std::string_view core);

// The best of OpenBLAS 0.3.21's x86-64 cores that `cpu_flags` (/proc/cpuinfo's words) allow:
// Cooperlake (AVX-512 with bf16), SkylakeX (AVX-512 F, CD, BW, DQ, VL), Haswell (AVX2, FMA; Zen on
// AMD), Sandybridge (AVX), Nehalem (SSE4.2), Core2 (SSSE3), else Prescott.
std::string best_blas_core(const std::set<std::string>& cpu_flags, bool amd);

// The core to ask for instead of `chosen` (what OpenBLAS picked by itself): empty unless the flags
// allow a wider vector class than `chosen`'s.
std::string better_blas_core(std::string_view chosen, const std::set<std::string>& cpu_flags, bool amd);

// Call first in main(). When OpenBLAS is DYNAMIC_ARCH, OPENBLAS_CORETYPE is unset and
// better_blas_core() names a core, sets OPENBLAS_CORETYPE to it and executes this program again
// with the same arguments (nothing has started yet, so nothing is lost); otherwise returns. The
// CUDA build and other BLAS libraries: returns. TRIDENT_TEST_BLAS_CORE_AS_IF_CHOSEN=1 (tests only)
// takes an OPENBLAS_CORETYPE the caller set as OpenBLAS's own choice.
void choose_blas_core_or_restart(char** argv);

// "OpenBLAS 0.3.21 ... | core SkylakeX" with blas_core_note() in brackets where there is one, for
// `trident --version` and the benchmarks that ask which kernels trident runs; empty unless OpenBLAS.
std::string openblas_kernels_line();

// After a restart, "OpenBLAS chose Prescott on this CPU; trident chose SkylakeX from its flags";
// empty otherwise.
std::string blas_core_note();

}  // namespace trident
