# Finds a BLAS and its CBLAS header; provides the target trident::blas.
# OpenBLAS is preferred (trident reports its core type and thread count at start-up); any other
# CBLAS works, set BLA_VENDOR to choose.
if(NOT DEFINED BLA_VENDOR)
  set(BLA_VENDOR OpenBLAS)
endif()
find_package(BLAS REQUIRED)

find_path(TRIDENT_CBLAS_INCLUDE_DIR cblas.h
  PATH_SUFFIXES openblas-pthread openblas x86_64-linux-gnu/openblas-pthread
  HINTS ${BLAS_ROOT}/include $ENV{OPENBLAS_ROOT}/include)
if(NOT TRIDENT_CBLAS_INCLUDE_DIR)
  message(FATAL_ERROR "cblas.h not found: install libopenblas-dev or set TRIDENT_CBLAS_INCLUDE_DIR.")
endif()

include(CheckSymbolExists)
set(CMAKE_REQUIRED_LIBRARIES ${BLAS_LIBRARIES})
check_symbol_exists(openblas_get_corename "${TRIDENT_CBLAS_INCLUDE_DIR}/cblas.h" TRIDENT_HAVE_OPENBLAS)
unset(CMAKE_REQUIRED_LIBRARIES)

add_library(trident_blas INTERFACE)
add_library(trident::blas ALIAS trident_blas)
target_include_directories(trident_blas SYSTEM INTERFACE "${TRIDENT_CBLAS_INCLUDE_DIR}")
target_link_libraries(trident_blas INTERFACE ${BLAS_LIBRARIES})
if(TRIDENT_HAVE_OPENBLAS)
  target_compile_definitions(trident_blas INTERFACE TRIDENT_HAVE_OPENBLAS=1)
endif()
message(STATUS "BLAS: ${BLAS_LIBRARIES} (cblas.h in ${TRIDENT_CBLAS_INCLUDE_DIR})")
