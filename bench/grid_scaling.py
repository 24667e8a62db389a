#!/usr/bin/python3
"""Grid benchmark (issue 3): data- and tensor-parallel throughput against one rank, same run.

Runs the `small` config (L=6, C=384, heads=6, V=4096, T=256, B=8 sequences per micro-batch):
  1 rank          the reference
  DP=2, 2 ranks   each replica does the reference's work (global batch doubles): ideal ratio 2
  TP=2, 2 ranks   the reference's batch split by heads/columns across 2 ranks: ideal ratio 2
Every rank runs OpenBLAS with --threads-per-rank threads (default 1) so that 2 ranks use the
machine's 2 cores and the 1-rank reference uses one; the ratio then measures the parallel
implementation, not BLAS threading. Also printed: the share of the DP step spent in exposed
(not overlapped) data-parallel communication, read from timeline.h5's dp_exposed_s column.
"""
import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import h5py

sys.path.insert(0, str(Path(__file__).resolve().parent))
from single_rank import CONFIGS, REPO, BenchError, run_checked, trident_overrides  # noqa: E402


def run_grid(args, tp, dp, env):
    cfg = CONFIGS["small"]
    with tempfile.TemporaryDirectory(prefix="trident-grid-") as run_dir:
        command = [args.mpirun, "-n", str(tp * dp), "--oversubscribe", "--bind-to", "none", str(args.trident),
                   "run", str(REPO / "input_decks" / "small.toml")]
        command += trident_overrides(cfg, args.steps, run_dir)
        command += ["--set", f"parallel.tp={tp}", "--set", f"parallel.dp={dp}",
                    "--set", f"parallel.bucket_mb={args.bucket_mb}"]
        run_checked(f"trident tp={tp} dp={dp}", command, env)
        with h5py.File(Path(run_dir) / "timeline.h5", "r") as f:
            steps = f["steps"]
            timed = [i for i, s in enumerate(steps["step"][()]) if s > args.warmup]
            pick = lambda name: statistics.median(float(steps[name][i]) for i in timed)  # noqa: E731
            return {"tokens_per_s": pick("tokens_per_s"), "step_time_s": pick("step_time_s"),
                    "dp_exposed_s": pick("dp_exposed_s")}


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
        dp2 = run_grid(args, 1, 2, env)
        tp2 = run_grid(args, 2, 1, env)
    except BenchError as error:
        print(f"grid_scaling: {error}", file=sys.stderr)
        return 1
    print(f"config small, {args.steps} steps (median after {args.warmup}), OPENBLAS_NUM_THREADS="
          f"{args.threads_per_rank} per rank, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
          f"bucket {args.bucket_mb} MiB")
    print(f"{'run':<14}{'tokens/s':>12}{'ms/step':>10}{'vs 1 rank':>11}{'exposed DP comm':>18}")
    for name, r in (("1 rank", one), ("DP=2", dp2), ("TP=2", tp2)):
        share = r["dp_exposed_s"] / r["step_time_s"]
        print(f"{name:<14}{r['tokens_per_s']:>12.0f}{r['step_time_s'] * 1e3:>10.1f}"
              f"{r['tokens_per_s'] / one['tokens_per_s']:>11.2f}{share:>17.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
