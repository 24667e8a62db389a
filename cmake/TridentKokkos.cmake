# Finds Kokkos and provides the target Kokkos::kokkos, with the backend the build asks for.
#
# Two kinds of install are supported:
#  - a standalone Kokkos 4.x (Spack, a user's build): its config exports a working target;
#  - Debian's Trilinos package (Kokkos 3.4.1): KokkosConfig.cmake computes its install prefix one
#    directory short, so Kokkos::kokkos points at a non-existent <prefix>/lib/include. We repair the
#    include path from Kokkos_INCLUDE_DIRS. This file is the only place that knows about it.
#
# The backend is fixed when Kokkos is built, and the kernels are written once for whichever it is:
# TRIDENT_ENABLE_CUDA=ON needs a Kokkos with CUDA, OFF one without (a CUDA Kokkos would hand the
# CPU build device pointers it cannot use). Files that use Kokkos are compiled by the compiler
# Kokkos was built with (nvcc_wrapper for CUDA), through Kokkos' own launcher, so CMAKE_CXX_COMPILER
# stays the host compiler.

find_package(Kokkos REQUIRED)

get_target_property(_trident_kokkos_inc Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
set(_trident_kokkos_inc_ok TRUE)
foreach(_dir IN LISTS _trident_kokkos_inc)
  if(NOT _dir MATCHES "^\\$<" AND NOT IS_DIRECTORY "${_dir}")
    set(_trident_kokkos_inc_ok FALSE)
  endif()
endforeach()
if(NOT _trident_kokkos_inc_ok)
  if(NOT Kokkos_INCLUDE_DIRS)
    message(FATAL_ERROR "Kokkos::kokkos names missing include dirs (${_trident_kokkos_inc}) and "
                        "Kokkos_INCLUDE_DIRS is empty: point Kokkos_DIR at a working install.")
  endif()
  message(STATUS "Kokkos: repairing include dirs ${_trident_kokkos_inc} -> ${Kokkos_INCLUDE_DIRS}")
  set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${Kokkos_INCLUDE_DIRS}")
endif()

if("CUDA" IN_LIST Kokkos_DEVICES)
  set(_trident_kokkos_cuda ON)
else()
  set(_trident_kokkos_cuda OFF)
endif()
if(TRIDENT_ENABLE_CUDA AND NOT _trident_kokkos_cuda)
  message(FATAL_ERROR "TRIDENT_ENABLE_CUDA=ON needs a Kokkos built with its CUDA backend, but the Kokkos at "
                      "${Kokkos_DIR} has ${Kokkos_DEVICES}. Point Kokkos_ROOT at a CUDA build (e.g. "
                      "`spack install kokkos+cuda cuda_arch=90`, or scripts/build_kokkos_cuda).")
endif()
if(_trident_kokkos_cuda AND NOT TRIDENT_ENABLE_CUDA)
  message(FATAL_ERROR "The Kokkos at ${Kokkos_DIR} is built with CUDA: configure with the `cuda` preset "
                      "(TRIDENT_ENABLE_CUDA=ON), or point Kokkos_ROOT at a CPU build for the `cpu` presets.")
endif()
if(_trident_kokkos_cuda AND NOT CMAKE_CXX_COMPILER MATCHES "nvcc_wrapper|clang")
  kokkos_compilation(PROJECT)
endif()

message(STATUS "Kokkos ${Kokkos_VERSION} (devices: ${Kokkos_DEVICES})")
