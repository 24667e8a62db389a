# The CUDA toolkit (runtime, cuBLAS) and NCCL, for the GPU library layer (src/gpu). Only headers
# and libraries are needed: nothing here requires a GPU or nvcc. NCCL is looked for next to the
# toolkit (as in /usr/local/cuda) and under NCCL_ROOT (as Spack and NVIDIA's packages install it).
find_package(CUDAToolkit REQUIRED)

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
