#include "cli/cli_args.hpp"

#include <charconv>

#include "common/error.hpp"

namespace trident {

const char* usage_text() {
  return R"(trident: 3D-parallel (tensor x pipeline x data) GPT-2 and Llama training with MPI, Kokkos and BLAS

Usage:
  trident run   DECK [--set section.key=value ...]   train (under mpirun / srun)
  trident plan  DECK [--ranks N] [--show-schedule [--csv]] [--machine FILE [--search] [--json]] [--set section.key=value ...]
                grid, stage partition, parameters, FLOPs, memory, and a table of the pipeline
                schedules (gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-v, v-half, dualpipev, auto)
                with simulated bubbles; with --machine, the predicted step time, tokens/s, FLOP/s
                per device, MFU and whether each rank fits on that machine; with --search, the
                fastest grids of N (--ranks) devices that fit
  trident check DECK [--set section.key=value ...]   validate the deck and its schedule; print the
                ranks it needs and its run directory (lines "ranks: N ..." and "output: DIR")
  trident --help | --version

Options:
  --set section.key=value  override one deck key (repeatable), validated like the file,
                           e.g. --set train.steps=50 --set schedule.kind=gpipe; a value
                           is TOML where it parses as such: --set 'data.path=["a.bin", "b.bin"]'
  --ranks N                plan for a world of N ranks (dp = N / (tp * cp * pp) when the deck's
                           grid does not multiply to N)
  --show-schedule          plan: also draw the deck's schedule, one line per pipeline rank
                           (F forward, B backward, I input grad, W weight grad, . idle)
  --csv                    plan --show-schedule: print only the deck's schedule as a CSV action list, one row
                           per pipeline rank ("0F0,0F1,0I0,0W0,..."; PyTorch's layout), which
                           schedule.kind = "file" with schedule.file = PATH runs
  --machine FILE           plan: predict the step on the machine FILE describes (peaks, GEMM
                           efficiency, memory, links; input_decks/machines/*.toml)
  --search                 plan --machine: rank every grid (tp, cp, pp, dp, micro-batch size,
                           schedule, recomputation) of the same global batch that fits, fastest first
  --json                   plan --machine: print the prediction (or the search) as one JSON object only
  -h, --help               this text

Exit codes: 0 success, 1 runtime failure (or an internal error: a bug to report), 2 bad deck or
arguments, 3 checkpointed and stopped on SIGUSR1/SIGTERM (run again to resume from the checkpoint),
4 ended by the watchdog: a rank waited schedule.timeout_s for a peer that is stopped, dead or
unreachable (resume once its node is healthy).
Decks: input_decks/*.toml; every key and contract: DESIGN.md; examples: README.md.
)";
}

namespace {

Command parse_command(const std::string& word) {
  if (word == "run") return Command::run;
  if (word == "plan") return Command::plan;
  if (word == "check") return Command::check;
  throw InputError("unknown command '" + word + "': expected run, plan or check (see trident --help)");
}

int parse_positive_int(const std::string& option, const std::string& text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1)
    throw InputError(option + " " + text + ": expected a positive integer, e.g. " + option + " 8");
  return value;
}

}  // namespace

CliArgs parse_cli(int argc, char** argv) {
  CliArgs args;
  if (argc < 2)
    throw InputError("no command given: expected run, plan or check (see trident --help)");
  const std::string first = argv[1];
  if (first == "-h" || first == "--help") return args;
  if (first == "--version") {
    args.command = Command::version;
    return args;
  }
  args.command = parse_command(first);

  for (int i = 2; i < argc; ++i) {
    const std::string word = argv[i];
    auto next_value = [&](const std::string& option) -> std::string {
      if (i + 1 >= argc) throw InputError(option + " needs a value (see trident --help)");
      return argv[++i];
    };
    if (word == "-h" || word == "--help") {
      args.show_help = true;
    } else if (word == "--set" || word.rfind("--set=", 0) == 0) {
      const std::string assignment = word == "--set" ? next_value("--set") : word.substr(6);
      const auto eq = assignment.find('=');
      if (eq == std::string::npos || eq == 0)
        throw InputError("--set " + assignment +
                         ": expected section.key=value, e.g. --set train.lr=3e-4");
      args.overrides.push_back(assignment);
    } else if (word == "--ranks" || word.rfind("--ranks=", 0) == 0) {
      if (args.command != Command::plan)
        throw InputError("--ranks is an option of `trident plan` only; `run` takes the world size from MPI");
      args.ranks = parse_positive_int("--ranks", word == "--ranks" ? next_value("--ranks") : word.substr(8));
    } else if (word == "--show-schedule") {
      if (args.command != Command::plan)
        throw InputError("--show-schedule is an option of `trident plan` only, e.g. trident plan DECK --show-schedule");
      args.show_schedule = true;
    } else if (word == "--machine" || word.rfind("--machine=", 0) == 0) {
      if (args.command != Command::plan)
        throw InputError("--machine is an option of `trident plan` only, e.g. trident plan DECK --machine FILE");
      args.machine_path = word == "--machine" ? next_value("--machine") : word.substr(10);
    } else if (word == "--search") {
      if (args.command != Command::plan)
        throw InputError("--search is an option of `trident plan --machine FILE` only");
      args.search = true;
    } else if (word == "--csv") {
      if (args.command != Command::plan) throw InputError("--csv is an option of `trident plan --show-schedule` only");
      args.csv = true;
    } else if (word == "--json") {
      if (args.command != Command::plan) throw InputError("--json is an option of `trident plan --machine FILE` only");
      args.json = true;
    } else if (word.rfind("-", 0) == 0) {
      throw InputError("unknown option '" + word + "' (see trident --help)");
    } else if (args.deck_path.empty()) {
      args.deck_path = word;
    } else {
      throw InputError("unexpected argument '" + word + "': only one DECK is taken (see trident --help)");
    }
  }
  if ((args.json || args.search) && args.machine_path.empty())
    throw InputError(std::string(args.json ? "--json" : "--search") +
                     " predicts for a machine: add --machine FILE (input_decks/machines/*.toml)");
  if (args.csv && (!args.show_schedule || !args.machine_path.empty()))
    throw InputError("--csv prints the deck's schedule alone: use trident plan DECK --show-schedule --csv");
  if (args.deck_path.empty() && !args.show_help)
    throw InputError("missing DECK: e.g. trident " + first + " input_decks/tiny.toml");
  return args;
}

}  // namespace trident
