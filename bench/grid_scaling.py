#!/usr/bin/python3
"""Grid benchmark (issue 3): data- and tensor-parallel throughput against one rank, same run.

Runs the `small` config (L=6, C=384, heads=6, V=4096, T=256, B=8 sequences per micro-batch):
  1 rank          the reference
  DP=2, 2 ranks   each replica does the reference's work (global batch doubles): ideal ratio 2
  TP=2, 2 ranks   the reference's batch split by heads/columns across 2 ranks: ideal ratio 2
Every rank runs OpenBLAS with --threads-per-rank threads (default 1) so that 2 ranks use the
machine's 2 cores and the 1-rank reference uses one; the ratio then measures the parallel
implementation, not BLAS threading. A second reference, two independent 1-rank runs side by side
(one per core, no communication), shows what the machine itself gives two busy cores: the ceiling
for DP=2 once shared caches, memory bandwidth and clocks are counted. Also printed: the share of
each step spent in exposed (not overlapped) communication, read from timeline.h5: dp_exposed_s
(the data-parallel gradient all-reduce) plus tp_comm_s (time blocked in tensor-parallel
collectives), each the largest any rank saw in the step.

This machine's speed drifts by tens of percent within minutes (a 1-rank run alone gave 581 to 919
tokens/s within one hour). So the four runs are taken in rounds (--rounds, default 3),
each ratio is formed within a round, from runs minutes apart, and the table shows the median over
the rounds with the lowest and highest round beside it.

Each rank is bound to cores of its own (--bind cores, the default, when the ranks' threads fit the
machine), as the job scripts bind them.
"""
import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
from single_rank import (CONFIGS, REPO, BenchError, open_timeline, run_checked, timeline_medians,  # noqa: E402
                         trident_overrides)


def launch(args, ranks, cpu_offset=None):
    """mpirun with each rank bound to --threads-per-rank cores of its own; cpu_offset pins the
    whole (one-rank) job to the cores from there instead, for two jobs side by side."""
    if args.bind == "none" or (cpu_offset or 0) + ranks * args.threads_per_rank > os.cpu_count():
        return [args.mpirun, "-n", str(ranks), "--oversubscribe", "--bind-to", "none"]
    if cpu_offset is not None:
        cores = f"{cpu_offset}-{cpu_offset + args.threads_per_rank - 1}"
        return ["taskset", "-c", cores, args.mpirun, "-n", str(ranks), "--bind-to", "none"]
    return [args.mpirun, "-n", str(ranks), "--map-by", f"slot:PE={args.threads_per_rank}", "--bind-to", "core"]


def grid_command(args, tp, dp, run_dir, cpu_offset=None):
    command = launch(args, tp * dp, cpu_offset) + [str(args.trident), "run", str(REPO / "input_decks" / "small.toml")]
    command += trident_overrides(CONFIGS["small"], args.steps, run_dir)
    return command + ["--set", f"parallel.tp={tp}", "--set", f"parallel.dp={dp}",
                      "--set", f"parallel.bucket_mb={args.bucket_mb}"]


def medians(args, run_dir):
    tl = open_timeline(Path(run_dir))
    median = timeline_medians(tl, args.warmup, "tokens_per_s", "step_time_s", "dp_exposed_s", "tp_comm_s")
    return {"tokens_per_s": median["tokens_per_s"], "step_time_s": median["step_time_s"],
            "exposed_comm_s": median["dp_exposed_s"] + median["tp_comm_s"]}


def run_grid(args, tp, dp, env):
    with tempfile.TemporaryDirectory(prefix="trident-grid-") as run_dir:
        run_checked(f"trident tp={tp} dp={dp}", grid_command(args, tp, dp, run_dir), env)
        return medians(args, run_dir)


def run_side_by_side(args, env):
    """Two independent 1-rank runs at once, one per core: what this machine gives two ranks that
    never talk to each other (shared caches, memory bandwidth, clocks), the ceiling for DP=2."""
    with tempfile.TemporaryDirectory(prefix="trident-grid-") as a, tempfile.TemporaryDirectory(prefix="trident-grid-") as b:
        commands = [grid_command(args, 1, 1, d, cpu_offset=i * args.threads_per_rank) for i, d in enumerate((a, b))]
        procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for c in commands]
        for proc, command in zip(procs, commands):
            output, _ = proc.communicate()
            if proc.returncode != 0:
                raise BenchError(f"side-by-side 1-rank run failed with exit code {proc.returncode}:\n"
                                 f"  {shlex.join(command)}\n" + "\n".join(output.splitlines()[-40:]))
        runs = [medians(args, d) for d in (a, b)]
    return {"tokens_per_s": sum(r["tokens_per_s"] for r in runs),
            "step_time_s": max(r["step_time_s"] for r in runs), "exposed_comm_s": 0.0}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trident", default=str(REPO / "build" / "cpu" / "src" / "trident"))
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads-per-rank", type=int, default=1)
    parser.add_argument("--bucket-mb", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bind", choices=("cores", "none"), default="cores",
                        help="cores: each rank on --threads-per-rank cores of its own (when they fit); none: the OS places them")
    args = parser.parse_args()
    if not Path(args.trident).is_file():
        print(f"grid_scaling: no trident binary at {args.trident}: build it (scripts/setup)", file=sys.stderr)
        return 2
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads_per_rank),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    runs = {"1 rank": lambda: run_grid(args, 1, 1, env), "2 x 1 rank side by side": lambda: run_side_by_side(args, env),
            "DP=2": lambda: run_grid(args, 1, 2, env), "TP=2": lambda: run_grid(args, 2, 1, env)}
    rounds = []
    try:
        for number in range(1, args.rounds + 1):
            round_results = {}
            for name, run in runs.items():
                round_results[name] = run()
                print(f"round {number}/{args.rounds}: {name:<24}{round_results[name]['tokens_per_s']:>8.0f} tokens/s",
                      flush=True)
            rounds.append(round_results)
    except BenchError as error:
        print(f"grid_scaling: {error}", file=sys.stderr)
        return 1
    print(f"config small, {args.steps} steps (median after {args.warmup}), {args.rounds} rounds, OPENBLAS_NUM_THREADS="
          f"{args.threads_per_rank} per rank, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
          f"bucket {args.bucket_mb} MiB, ranks bound to {args.bind}; each column: median over rounds [lowest, highest]")

    def spread(values, fmt):
        values = sorted(values)
        return f"{format(statistics.median(values), fmt)} [{format(values[0], fmt)}, {format(values[-1], fmt)}]"

    print(f"{'run':<25}{'tokens/s':>20}{'vs 1 rank':>22}{'vs 2 x 1 rank':>22}{'exposed comm':>26}")
    for name in runs:
        tokens = [r[name]["tokens_per_s"] for r in rounds]
        vs_one = [r[name]["tokens_per_s"] / r["1 rank"]["tokens_per_s"] for r in rounds]
        vs_pair = [r[name]["tokens_per_s"] / r["2 x 1 rank side by side"]["tokens_per_s"] for r in rounds]
        exposed = [100 * r[name]["exposed_comm_s"] / r[name]["step_time_s"] for r in rounds]
        print(f"{name:<25}{spread(tokens, '.0f'):>20}{spread(vs_one, '.2f'):>22}{spread(vs_pair, '.2f'):>22}"
              f"{spread(exposed, '.1f') + ' %':>26}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
