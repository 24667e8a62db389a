# Sourced by the project's scripts: Open MPI as root (CI and these machines run as root) and the
# sanitizer settings of the cpu-debug preset (Open MPI's own allocations are not our leaks).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMPI_MCA_hwloc_base_binding_policy=none  # ranks share the cores; let BLAS threads use them
