// The subcommands. Each returns the process exit code.
#pragma once

#include "cli/cli_args.hpp"

namespace trident {

int version_command();                                    // the version and, on OpenBLAS, its kernels
int check_command(const CliArgs& args);                   // no MPI
int plan_command(const CliArgs& args);                    // no MPI
int run_command(const CliArgs& args, int argc, char** argv);  // MPI + Kokkos

}  // namespace trident
