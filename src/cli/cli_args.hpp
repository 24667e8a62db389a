// The command line (DESIGN.md "Command line"): parsed into plain data, nothing run here.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace trident {

enum class Command { run, plan, check, help, version };

struct CliArgs {
  Command command = Command::help;
  std::string deck_path;
  std::vector<std::string> overrides;  // "section.key=value" from --set
  std::optional<int> ranks;            // plan --ranks N
  bool show_schedule = false;          // plan --show-schedule: draw the deck's schedule
  std::string machine_path;            // plan --machine FILE: predict the step on that machine
  bool json = false;                   // plan --json: the prediction as one JSON object
  bool csv = false;                    // plan --show-schedule --csv: the schedule as a CSV action list only
  bool search = false;                 // plan --search: rank the grids that fit the machine
  bool show_help = false;              // `trident <command> --help`
};

// Throws InputError (exit code 2) naming the offending argument.
CliArgs parse_cli(int argc, char** argv);

const char* usage_text();

}  // namespace trident
