#!/usr/bin/python3
"""Context parallelism (issue 38) on this machine, measured in one run.

1. The longest sequence one rank can train at cp 1 against cp 2: the longest power-of-two seq_len
   whose planned memory per rank (`trident plan --machine`, plan/memory.hpp: weights, gradients,
   AdamW state, activations, workspace and the ring's buffers) fits a per-rank budget (--budget-mib,
   standing in for a device's memory), then one step trained at that length on 1 and on 2 ranks,
   with the measured activation peak (/steps/peak_activation_bytes) and resident set
   (/steps/peak_rss_bytes) of the largest rank.
2. The step time of one fixed long sequence (--seq-len) on the same cores: cp 1 (one rank with
   every core's BLAS threads) against cp 2 (two ranks, the cores split), in rounds (this machine's
   speed drifts: each ratio is formed within a round; median and range over rounds), with the time
   the ring's hops were not hidden behind attention (/steps/cp_comm_s, the largest rank's) and the
   timeline's RING_CP events (bytes sent per step and rank).

The model: GPT-2 shape, --layers, --d-model, --heads (default 2 x 256, 4 heads), vocabulary 4096,
one sequence per micro-batch, tiled attention, synthetic data. OPENBLAS_CORETYPE is unset (the
machine's own GEMM kernels) unless --keep-coretype; the core type that ran is printed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from single_rank import REPO, BenchError, open_timeline, own_blas_kernels, run_checked, spread  # noqa: E402

DECK = REPO / "input_decks" / "tiny.toml"
MACHINE = REPO / "input_decks" / "machines" / "cpu-2core.toml"


def model_overrides(args, seq_len, cp, steps, run_dir=None):
    settings = {"model.family": "gpt2", "model.layers": args.layers, "model.d_model": args.d_model,
                "model.heads": args.heads, "model.vocab": 4096, "model.seq_len": seq_len,
                "model.attention": '"tiled"', "parallel.tp": 1, "parallel.pp": 1, "parallel.dp": 1,
                "parallel.cp": cp, "schedule.microbatches": 1, "schedule.micro_batch_size": 1,
                "train.steps": steps, "train.warmup_steps": 0, "checkpoint.every": 0, "data.kind": "synthetic"}
    if run_dir is not None:
        settings["output.dir"] = run_dir
    return [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]


def planned_bytes(args, seq_len, cp):
    """The largest pipeline rank's planned memory (plan --machine's memory_per_rank_bytes)."""
    command = [args.trident, "plan", str(DECK), "--machine", str(MACHINE), "--json", *model_overrides(args, seq_len, cp, 1)]
    return max(json.loads(run_checked(f"trident plan seq_len={seq_len} cp={cp}", command, os.environ))
               ["memory_per_rank_bytes"])


def longest_fitting(args, cp):
    seq_len, longest = 2 * 128 * cp, None  # whole query tiles per chunk
    while planned_bytes(args, seq_len, cp) <= args.budget_mib * (1 << 20):
        longest = seq_len
        seq_len *= 2
    if longest is None:
        raise BenchError(f"not even seq_len {seq_len} fits {args.budget_mib} MiB per rank at cp {cp}")
    return longest


def train(args, env, seq_len, cp, steps):
    """Trains on cp ranks; returns the timeline's steps and events."""
    threads = max(1, args.cores // cp)
    run_env = dict(env, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory(prefix="trident-cp-") as run_dir:
        command = [args.mpirun, "-n", str(cp), "--bind-to", "none", args.trident, "run", str(DECK),
                   *model_overrides(args, seq_len, cp, steps, run_dir)]
        run_checked(f"trident seq_len={seq_len} cp={cp}", command, run_env)
        timeline = open_timeline(Path(run_dir))
        return timeline.steps, timeline.events, timeline.attrs


def longest_rows(args, env):
    print(f"\n1. Longest sequence per rank within {args.budget_mib} MiB (planned), one step trained at it")
    print(f"{'cp':>4}{'seq_len':>10}{'planned MiB':>14}{'activation peak MiB':>22}{'resident peak MiB':>20}")
    found = {}
    for cp in (1, 2):
        seq_len = longest_fitting(args, cp)
        steps, _, attrs = train(args, env, seq_len, cp, 1)
        found[cp] = seq_len
        print(f"{cp:>4}{seq_len:>10}{planned_bytes(args, seq_len, cp) / (1 << 20):>14.1f}"
              f"{float(steps['peak_activation_bytes'][-1]) / (1 << 20):>22.1f}"
              f"{float(steps['peak_rss_bytes'][-1]) / (1 << 20):>20.1f}   (core {attrs.get('blas_core')})", flush=True)
    print(f"  cp 2 / cp 1: {found[2] / found[1]:.1f}x the sequence")


def step_rows(args, env):
    print(f"\n2. Step time at seq_len {args.seq_len} on {args.cores} cores, {args.steps} steps (median after the first), "
          f"{args.rounds} rounds: median [lowest, highest]")
    rounds = []
    for number in range(args.rounds):
        one, _, _ = train(args, env, args.seq_len, 1, args.steps)
        two, events, _ = train(args, env, args.seq_len, 2, args.steps)
        t1, t2 = float(np.median(one["step_time_s"][1:])), float(np.median(two["step_time_s"][1:]))
        exposed = float(np.median(two["cp_comm_s"][1:]))
        ring = (events["kind"] == "RING_CP") & (events["step"] == args.steps) & (events["rank"] == 0)
        rounds.append((t1, t2, exposed, int(events["bytes"][ring].sum())))
        print(f"  round {number + 1}: cp 1 {t1 * 1e3:.0f} ms, cp 2 {t2 * 1e3:.0f} ms, ring not hidden {exposed * 1e3:.1f} ms",
              flush=True)
    print(f"{'cp 1 (ms)':>22}{'cp 2 (ms)':>22}{'cp 1 / cp 2':>22}{'ring exposed / step':>24}{'ring MiB/step/rank':>20}")
    print(f"{spread([r[0] * 1e3 for r in rounds], '.0f'):>22}{spread([r[1] * 1e3 for r in rounds], '.0f'):>22}"
          f"{spread([r[0] / r[1] for r in rounds], '.2f'):>22}{spread([r[2] / r[1] for r in rounds], '.3f'):>24}"
          f"{rounds[-1][3] / (1 << 20):>20.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trident", default=str(REPO / "build" / "cpu" / "src" / "trident"))
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--budget-mib", type=int, default=512)
    parser.add_argument("--seq-len", type=int, default=8192)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cores", type=int, default=os.cpu_count())
    parser.add_argument("--keep-coretype", action="store_true", help="leave OPENBLAS_CORETYPE as it is")
    args = parser.parse_args()
    if not Path(args.trident).is_file():
        print(f"context_parallel: no trident binary at {args.trident}: build it (scripts/setup)", file=sys.stderr)
        return 2
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    if not args.keep_coretype:
        env = own_blas_kernels(env, args.trident)[0]
    print(f"OPENBLAS_CORETYPE={env.get('OPENBLAS_CORETYPE', 'unset (the machine own kernels)')}, "
          f"GPT-2 L={args.layers} C={args.d_model} H={args.heads}, one sequence per step")
    try:
        longest_rows(args, env)
        step_rows(args, env)
    except (BenchError, subprocess.CalledProcessError) as error:
        print(f"context_parallel: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
