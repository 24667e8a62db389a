# Finds Kokkos and KokkosKernels and provides the targets Kokkos::kokkos and Kokkos::kokkoskernels.
#
# Two kinds of install are supported:
#  - a standalone Kokkos 4.x (Spack, a user's build): its config exports both targets already;
#  - Debian's Trilinos packages (Kokkos 3.4.1): KokkosConfig.cmake computes its install prefix one
#    directory short, so Kokkos::kokkos points at a non-existent <prefix>/lib/include, and no
#    Kokkos::kokkoskernels target exists. We repair the include path from Kokkos_INCLUDE_DIRS and
#    build the missing target from the Trilinos library target. This file is the only place that
#    knows about the difference.

find_package(Kokkos REQUIRED)
find_package(KokkosKernels REQUIRED)

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

if(NOT TARGET Kokkos::kokkoskernels)
  if(NOT TARGET trilinos_kokkoskernels)
    message(FATAL_ERROR "KokkosKernels was found but exports neither Kokkos::kokkoskernels nor "
                        "trilinos_kokkoskernels.")
  endif()
  add_library(Kokkos::kokkoskernels INTERFACE IMPORTED)
  set_target_properties(Kokkos::kokkoskernels PROPERTIES
    INTERFACE_LINK_LIBRARIES "trilinos_kokkoskernels;Kokkos::kokkos"
    INTERFACE_INCLUDE_DIRECTORIES "${KokkosKernels_INCLUDE_DIRS}")
endif()

message(STATUS "Kokkos ${Kokkos_VERSION} (devices: ${Kokkos_DEVICES}), KokkosKernels ${KokkosKernels_VERSION}")
