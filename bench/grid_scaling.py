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
the DP step spent in exposed (not overlapped) data-parallel communication, read from
timeline.h5's dp_exposed_s column.
"""
import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py

sys.path.insert(0, str(Path(__file__).resolve().parent))
from single_rank import CONFIGS, REPO, BenchError, run_checked, trident_overrides  # noqa: E402


def grid_command(args, tp, dp, run_dir):
    command = [args.mpirun, "-n", str(tp * dp), "--oversubscribe", "--bind-to", "none", str(args.trident),
               "run", str(REPO / "input_decks" / "small.toml")]
    command += trident_overrides(CONFIGS["small"], args.steps, run_dir)
    return command + ["--set", f"parallel.tp={tp}", "--set", f"parallel.dp={dp}",
                      "--set", f"parallel.bucket_mb={args.bucket_mb}"]


def medians(args, run_dir):
    with h5py.File(Path(run_dir) / "timeline.h5", "r") as f:
        steps = f["steps"]
        timed = [i for i, s in enumerate(steps["step"][()]) if s > args.warmup]
        pick = lambda name: statistics.median(float(steps[name][i]) for i in timed)  # noqa: E731
        return {"tokens_per_s": pick("tokens_per_s"), "step_time_s": pick("step_time_s"),
                "dp_exposed_s": pick("dp_exposed_s")}


def run_grid(args, tp, dp, env):
    with tempfile.TemporaryDirectory(prefix="trident-grid-") as run_dir:
        run_checked(f"trident tp={tp} dp={dp}", grid_command(args, tp, dp, run_dir), env)
        return medians(args, run_dir)


def run_side_by_side(args, env):
    """Two independent 1-rank runs at once, one per core: what this machine gives two ranks that
    never talk to each other (shared caches, memory bandwidth, clocks), the ceiling for DP=2."""
    with tempfile.TemporaryDirectory(prefix="trident-grid-") as a, tempfile.TemporaryDirectory(prefix="trident-grid-") as b:
        commands = [grid_command(args, 1, 1, d) for d in (a, b)]
        procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for c in commands]
        for proc, command in zip(procs, commands):
            output, _ = proc.communicate()
            if proc.returncode != 0:
                raise BenchError(f"side-by-side 1-rank run failed with exit code {proc.returncode}:\n"
                                 f"  {shlex.join(command)}\n" + "\n".join(output.splitlines()[-40:]))
        runs = [medians(args, d) for d in (a, b)]
    return {"tokens_per_s": sum(r["tokens_per_s"] for r in runs),
            "step_time_s": max(r["step_time_s"] for r in runs), "dp_exposed_s": 0.0}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trident", default=str(REPO / "build" / "cpu" / "src" / "trident"))
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads-per-rank", type=int, default=1)
    parser.add_argument("--bucket-mb", type=float, default=4.0)
    args = parser.parse_args()
    if not Path(args.trident).is_file():
        print(f"grid_scaling: no trident binary at {args.trident}: build it (scripts/setup)", file=sys.stderr)
        return 2
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads_per_rank),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    try:
        one = run_grid(args, 1, 1, env)
        pair = run_side_by_side(args, env)
        dp2 = run_grid(args, 1, 2, env)
        tp2 = run_grid(args, 2, 1, env)
    except BenchError as error:
        print(f"grid_scaling: {error}", file=sys.stderr)
        return 1
    print(f"config small, {args.steps} steps (median after {args.warmup}), OPENBLAS_NUM_THREADS="
          f"{args.threads_per_rank} per rank, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
          f"bucket {args.bucket_mb} MiB")
    print(f"{'run':<22}{'tokens/s':>12}{'ms/step':>10}{'vs 1 rank':>11}{'vs 2 x 1 rank':>15}{'exposed DP comm':>18}")
    for name, r in (("1 rank", one), ("2 x 1 rank side by side", pair), ("DP=2", dp2), ("TP=2", tp2)):
        share = r["dp_exposed_s"] / r["step_time_s"]
        print(f"{name:<22}{r['tokens_per_s']:>12.0f}{r['step_time_s'] * 1e3:>10.1f}"
              f"{r['tokens_per_s'] / one['tokens_per_s']:>11.2f}{r['tokens_per_s'] / pair['tokens_per_s']:>15.2f}"
              f"{share:>17.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
