# The CUDA toolkit (runtime, cuBLAS) and NCCL, for the GPU library layer (src/gpu), and nvcc for
# its own kernels (src/gpu/*.cu, machine code for Hopper, sm_90, unless CMAKE_CUDA_ARCHITECTURES
# says otherwise). Nothing here requires a GPU. NCCL is looked for next to the
# toolkit (as in /usr/local/cuda) and under NCCL_ROOT (as Spack and NVIDIA's packages install it).
find_package(CUDAToolkit REQUIRED)
if(NOT CMAKE_CUDA_COMPILER)
  set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}")
endif()
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90)
endif()
# C++17 for the .cu files: CMake before 3.26 knows no C++20 flag for nvcc.
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
enable_language(CUDA)

find_path(TRIDENT_NCCL_INCLUDE_DIR nccl.h
  HINTS ${NCCL_ROOT} ENV NCCL_ROOT ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
find_library(TRIDENT_NCCL_LIBRARY nccl
  HINTS ${NCCL_ROOT} ENV NCCL_ROOT ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
if(NOT TRIDENT_NCCL_INCLUDE_DIR OR NOT TRIDENT_NCCL_LIBRARY)
  message(FATAL_ERROR "NCCL not found (nccl.h and libnccl): install it with the CUDA toolkit or point "
                      "NCCL_ROOT at its prefix (-DNCCL_ROOT=/path or the NCCL_ROOT environment variable)")
endif()
add_library(Trident::nccl UNKNOWN IMPORTED)
set_target_properties(Trident::nccl PROPERTIES
  IMPORTED_LOCATION "${TRIDENT_NCCL_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${TRIDENT_NCCL_INCLUDE_DIR}")
message(STATUS "CUDA toolkit ${CUDAToolkit_VERSION} (${CUDAToolkit_INCLUDE_DIRS}); NCCL ${TRIDENT_NCCL_LIBRARY}")
