# Sourced by the project's scripts: Open MPI as root (CI and these machines run as root) and the
# sanitizer settings of the cpu-debug preset (Open MPI's own allocations are not our leaks).
# Oversubscription and binding are left to each caller: scripts/test allows both for the tests,
# scripts/main-job asks for them only when the ranks outnumber the cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
