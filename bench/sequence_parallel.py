#!/usr/bin/python3
"""Sequence parallelism and selective recomputation (issue 18), measured in one run.

1. Activation memory per rank with and without parallel.sequence_parallel at tp 2 and tp 4
   (GPT-2, L=4, C=512, H=8, T=512, B=2, one micro-batch): the measured peak
   (/steps/peak_activation_bytes_per_stage) and what it saves, against the saving expected if the
   residual stream's tensors (each layer's input norm outputs and statistics, residuals, block
   output; the embedding output and the final norm), counted here from the model's shapes, were
   divided by tp and nothing else changed.
2. Step time at tp 2 with and without sequence parallelism on the `small` config (L=6, C=384,
   T=256, B=8), one BLAS thread per rank, ranks bound to cores, in rounds (this machine's speed
   drifts: each ratio is formed within a round; median and range over rounds).
3. Recomputation none, selective and full on the same config cut into 2 pipeline stages (pp 2,
   1F1B, 4 micro-batches of 2 sequences: stage 0 holds 2 in flight), equal micro-batches for all
   three: step time and the largest stage's peak activation memory.

OPENBLAS_CORETYPE is unset (the machine's own GEMM kernels) unless --keep-coretype; the core type
that ran is printed.
"""
import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grid_scaling import launch  # noqa: E402  (each rank on cores of its own, as a batch job binds them)
from single_rank import (CONFIGS, REPO, BenchError, open_timeline, own_blas_kernels, run_checked,  # noqa: E402
                         spread, trident_overrides)

MEMORY_SHAPE = dict(family="gpt2", layers=4, d_model=512, heads=8, vocab=4096, seq_len=512, batch=2)


def run(args, env, cfg, tp, steps, *overrides, pp=1):
    """Trains `steps` steps on tp x pp ranks; returns the timeline's median step time after the
    first step and the last step's peak activation bytes (the largest stage's)."""
    with tempfile.TemporaryDirectory(prefix="trident-sp-") as run_dir:
        command = launch(args, tp * pp) + [str(args.trident), "run", str(REPO / "input_decks" / "small.toml")]
        command += trident_overrides(cfg, steps, run_dir) + ["--set", f"parallel.tp={tp}", "--set", f"parallel.pp={pp}"]
        for override in overrides:
            command += ["--set", override]
        run_checked(f"trident tp={tp} {' '.join(overrides)}", command, env)
        timeline = open_timeline(Path(run_dir))
        medians = timeline.medians_after(1, "step_time_s")
        peak = float(timeline.steps["peak_activation_bytes"][-1])
        return {"step_time_s": medians["step_time_s"], "peak": peak, "blas_core": timeline.attrs.get("blas_core")}


def stream_bytes(cfg):
    """Bytes of one micro-batch's residual-stream tensors on a rank holding the whole model."""
    rows, C, L = cfg["batch"] * cfg["seq_len"], cfg["d_model"], cfg["layers"]
    per_layer = 4 * rows * C + 2 * 2 * rows  # ln_1, residual, ln_2, block output; two norms' mean and rstd
    return 4 * (rows * C + L * per_layer + rows * C + 2 * rows)  # + embedding output, ln_f and its stats


def memory_rows(args, env):
    print(f"\n1. Activation memory per rank, GPT-2 L={MEMORY_SHAPE['layers']} C={MEMORY_SHAPE['d_model']} "
          f"H={MEMORY_SHAPE['heads']} T={MEMORY_SHAPE['seq_len']} B={MEMORY_SHAPE['batch']} (MiB)")
    print(f"{'tp':>4}{'without SP':>14}{'with SP':>12}{'saved':>10}{'stream / tp':>14}{'saved / expected':>19}")
    for tp in (2, 4):
        first = run(args, env, MEMORY_SHAPE, tp, 2)
        if tp == 2:
            print(f"  (OpenBLAS core type that ran: {first['blas_core']})")
        off = first["peak"]
        on = run(args, env, MEMORY_SHAPE, tp, 2, "parallel.sequence_parallel=true")["peak"]
        expected = stream_bytes(MEMORY_SHAPE) * (1 - 1 / tp)
        mib = 1 << 20
        print(f"{tp:>4}{off / mib:>14.2f}{on / mib:>12.2f}{(off - on) / mib:>10.2f}{expected / mib:>14.2f}"
              f"{(off - on) / expected:>19.3f}", flush=True)


def step_time_rows(args, env):
    cfg = CONFIGS["small"]
    print(f"\n2. Step time at tp 2, config small, {args.steps} steps (median after the first), {args.rounds} rounds: "
          "median [lowest, highest]")
    rounds = []
    for number in range(args.rounds):
        off = run(args, env, cfg, 2, args.steps)["step_time_s"]
        on = run(args, env, cfg, 2, args.steps, "parallel.sequence_parallel=true")["step_time_s"]
        rounds.append((off, on))
        print(f"  round {number + 1}: without {off * 1e3:.1f} ms, with {on * 1e3:.1f} ms", flush=True)
    print(f"{'without SP (ms)':>24}{'with SP (ms)':>24}{'with / without':>24}")
    print(f"{spread([r[0] * 1e3 for r in rounds], '.1f'):>24}{spread([r[1] * 1e3 for r in rounds], '.1f'):>24}"
          f"{spread([r[1] / r[0] for r in rounds], '.3f'):>24}")


def recompute_rows(args, env):
    cfg = dict(CONFIGS["small"], batch=2)
    modes = ("none", "selective", "full")
    print(f"\n3. Recomputation at pp 2 (1f1b), config small, {args.steps} steps, 4 micro-batches of 2 sequences, "
          f"{args.rounds} rounds")
    rounds = []
    for number in range(args.rounds):
        rounds.append({mode: run(args, env, cfg, 1, args.steps, f"schedule.recompute={mode}", "schedule.microbatches=4",
                                 "schedule.kind=1f1b", pp=2) for mode in modes})
        print(f"  round {number + 1}: " + ", ".join(f"{m} {rounds[-1][m]['step_time_s'] * 1e3:.1f} ms" for m in modes),
              flush=True)
    print(f"{'recompute':>12}{'step / none: median [lowest, highest]':>40}{'peak act. (MiB)':>18}{'vs none':>10}")
    for mode in modes:
        ratios = [r[mode]["step_time_s"] / r["none"]["step_time_s"] for r in rounds]
        peak, none_peak = rounds[-1][mode]["peak"], rounds[-1]["none"]["peak"]
        print(f"{mode:>12}{spread(ratios, '.3f'):>40}{peak / (1 << 20):>18.2f}{peak / none_peak:>10.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trident", default=str(REPO / "build" / "cpu" / "src" / "trident"))
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads-per-rank", type=int, default=1)
    parser.add_argument("--bind", choices=("cores", "none"), default="cores",
                        help="cores: each rank on --threads-per-rank cores of its own (when they fit); none: the OS places them")
    parser.add_argument("--keep-coretype", action="store_true", help="leave OPENBLAS_CORETYPE as it is")
    args = parser.parse_args()
    if not Path(args.trident).is_file():
        print(f"sequence_parallel: no trident binary at {args.trident}: build it (scripts/setup)", file=sys.stderr)
        return 2
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads_per_rank),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if not args.keep_coretype:
        env = own_blas_kernels(env, args.trident)[0]
    print(f"OPENBLAS_CORETYPE={env.get('OPENBLAS_CORETYPE', 'unset (the machine own kernels)')}, "
          f"OPENBLAS_NUM_THREADS={args.threads_per_rank} per rank")
    try:
        memory_rows(args, env)
        step_time_rows(args, env)
        recompute_rows(args, env)
    except BenchError as error:
        print(f"sequence_parallel: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
