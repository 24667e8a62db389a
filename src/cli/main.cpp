// trident: entry point. Parses the command line and dispatches; exit codes per DESIGN.md
// (0 ok, 1 runtime failure, 2 bad deck or arguments, 3 checkpointed and stopped, 4 ended by the
// watchdog).
#include <iostream>

#include "cli/cli_args.hpp"
#include "cli/commands.hpp"
#include "common/error.hpp"
#include "kernels/blas_core.hpp"

int main(int argc, char** argv) {
  using namespace trident;
  choose_blas_core_or_restart(argv);
  CliArgs args;
  try {
    args = parse_cli(argc, argv);
  } catch (const InputError& error) {
    std::cerr << "trident: error: " << error.what() << "\n";
    return kExitBadInput;
  }
  if (args.command == Command::help || args.show_help) {
    std::cout << usage_text();
    return kExitOk;
  }
  switch (args.command) {
    case Command::version: return version_command();
    case Command::check: return check_command(args);
    case Command::plan: return plan_command(args);
    case Command::run: return run_command(args, argc, argv);
    case Command::help: break;
  }
  return kExitOk;
}
