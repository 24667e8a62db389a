#!/usr/bin/python3
"""CPU performance against PyTorch (issue 19, item 1): trident on one rank and on 2-rank grids.

In one invocation, for each config (default: GPT-2 124M at T = 256, B = 4 and at T = 1024, B = 1,
and the ~100M Llama at T = 256, B = 4): trident on one rank with the BLAS on every core; trident on
tp 2 and dp 2 with one thread per rank, each rank bound to a core of its own (dp 2 only where the
batch splits); and the same model and optimizer in PyTorch (bench/pytorch_model.py) at each thread
setting of --torch-settings, of which the fastest is the reference. Prints step-time medians, the
ratio to PyTorch, and MFU against the sgemm peak that trident's ranks measured at start-up in the
same run (summed over the ranks: each measures its own with its threads), the MFU that 1.5x
PyTorch would take, the BLAS core type that ran, and the machine's load average before and after.
--rounds N repeats each config's runs back to back and takes each ratio within a round: this VM's
speed drifts by several percent over minutes, and only a ratio measured side by side survives it.
"""
import argparse
import os
import shlex
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grid_scaling import launch  # noqa: E402  (each rank on cores of its own, as a batch job binds them)
from single_rank import (CONFIGS, REPO, BenchError, cpu_model, flops_per_step, open_timeline,  # noqa: E402
                         own_blas_kernels, run_checked, run_pytorch, timeline_medians, trident_overrides)

DEFAULT_CONFIGS = "gpt2,gpt2-t1024,llama"
GRIDS = {"1": (1, 1), "tp2": (2, 1), "dp2": (1, 2)}


def trident_grid(args, cfg, grid, env):
    """Median step time and the summed sgemm peak of one trident run on `grid`."""
    tp, dp = GRIDS[grid]
    ranks = tp * dp
    env = dict(env)
    threads = args.cores if ranks == 1 else 1
    env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(threads)
    with tempfile.TemporaryDirectory(prefix="trident-perf-") as run_dir:
        command = launch(args, ranks) if ranks > 1 else []
        command += [str(args.trident), "run", str(REPO / "input_decks" / "small.toml")]
        command += trident_overrides(cfg, args.steps, run_dir)
        command += ["--set", f"parallel.tp={tp}", "--set", f"parallel.dp={dp}",
                    "--set", f"schedule.micro_batch_size={cfg['batch'] // dp}",
                    "--set", f"model.attention={args.attention}"]
        run_checked(f"trident {grid}", command, env)
        tl = open_timeline(Path(run_dir) / "timeline.h5")
        seconds = timeline_medians(tl, args.warmup, "step_time_s")["step_time_s"]
        return {"seconds": seconds, "peak_gflops": ranks * float(tl.attrs["gemm_peak_gflops"]),
                "blas": f"core {tl.attrs['blas_core']}, {tl.attrs['blas_threads']} BLAS thread(s) per rank",
                "threads": threads, "ranks": ranks}


def pytorch_ms_per_setting(args, cfg, env):
    """PyTorch's ms/step at each of the --torch-settings (intra-op threads, BLAS threads)."""
    times = {}
    for intra, blas in args.torch_settings:
        run_args = argparse.Namespace(steps=args.steps, warmup=args.warmup, threads=intra, device="cpu")
        times[(intra, blas)] = run_pytorch(run_args, cfg, env, blas_threads=blas)["ms_per_step"]
    return times


def grids_for(cfg, requested):
    """dp 2 needs a batch that splits in two; tp 2 the heads."""
    return [g for g in requested if cfg["batch"] % GRIDS[g][1] == 0 and cfg["heads"] % GRIDS[g][0] == 0]


def one_round(args, cfg, name, env):
    """PyTorch at each setting, then trident on each grid: ms/step of each, and the runs' details."""
    torch_ms = pytorch_ms_per_setting(args, cfg, env)
    trident = {}
    for grid in grids_for(cfg, args.grids):
        print(f"  {name}: trident {grid} ...", file=sys.stderr, flush=True)
        trident[grid] = trident_grid(args, cfg, grid, env)
    return torch_ms, trident


def spread(values, digits):
    """The median, and [lowest, highest] when there is more than one value."""
    text = f"{statistics.median(values):.{digits}f}"
    return text if len(values) == 1 else f"{text} [{min(values):.{digits}f}, {max(values):.{digits}f}]"


def bench_config(args, name, env):
    """Rows for one config. Each round times PyTorch and trident back to back; a row's ratio is the
    median over rounds of the ratio within a round, so that the VM's drift between rounds cancels."""
    cfg = CONFIGS[name]
    flops = flops_per_step(cfg)
    rounds = [one_round(args, cfg, name, env) for _ in range(args.rounds)]
    best_torch = [min(torch_ms.values()) for torch_ms, _ in rounds]
    # PyTorch's model GFLOP/s times 1.5: what a row's MFU must reach for 1.5x PyTorch.
    target_gflops = 1.5 * flops / (statistics.median(best_torch) / 1e3) / 1e9
    rows, blas_seen = [], set()
    for grid in rounds[0][1]:
        runs = [trident[grid] for _, trident in rounds]
        blas_seen |= {run["blas"] for run in runs}
        seconds = statistics.median(run["seconds"] for run in runs)
        peak = statistics.median(run["peak_gflops"] for run in runs)
        gflops = flops / seconds / 1e9
        mfu_for_target = target_gflops / peak
        rows.append([name, f"trident {grid}", f"{runs[0]['ranks']}×{runs[0]['threads']}", f"{1e3 * seconds:.0f}",
                     f"{cfg['batch'] * cfg['seq_len'] / seconds:.0f}", f"{gflops:.1f}", f"{100 * gflops / peak:.1f}%",
                     f"{100 * mfu_for_target:.1f}%", f"{peak:.1f}",
                     spread([torch / (1e3 * run["seconds"]) for torch, run in zip(best_torch, runs)], 2)])
    for setting in rounds[0][0]:
        intra, blas = setting
        ms = statistics.median(torch_ms[setting] for torch_ms, _ in rounds)
        rows.append([name, f"torch {intra}/{blas}", f"1×{max(intra, blas)}", f"{ms:.0f}",
                     f"{cfg['batch'] * cfg['seq_len'] / (ms / 1e3):.0f}", f"{flops / (ms / 1e3) / 1e9:.1f}", "", "", "",
                     spread([best / torch_ms[setting] for best, (torch_ms, _) in zip(best_torch, rounds)], 2)])
    return rows, blas_seen


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=DEFAULT_CONFIGS, help=f"comma-separated, from: {', '.join(CONFIGS)} "
                                                                   f"(default {DEFAULT_CONFIGS})")
    parser.add_argument("--grids", default="1,tp2,dp2", help="trident grids, from 1, tp2, dp2 (default: all)")
    parser.add_argument("--torch-settings", default="2/2,1/2",
                        help="PyTorch intra-op/BLAS thread settings to try; the fastest is the reference "
                             "(default 2/2,1/2)")
    parser.add_argument("--attention", choices=("tiled", "explicit"), default="tiled",
                        help="trident's model.attention (default tiled)")
    parser.add_argument("--steps", type=int, default=8, help="training steps per run (default 8)")
    parser.add_argument("--warmup", type=int, default=2, help="leading steps left out of the medians (default 2)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="times to repeat each config's PyTorch and trident runs, back to back (default 1)")
    parser.add_argument("--bind", choices=("cores", "none"), default="cores",
                        help="2-rank runs: each rank bound to a core of its own (default) or not bound")
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--trident", type=Path, default=REPO / "build" / "cpu" / "src" / "trident")
    args = parser.parse_args()
    args.configs = args.configs.split(",")
    args.grids = args.grids.split(",")
    args.cores = len(os.sched_getaffinity(0))
    args.threads_per_rank = 1  # what grid_scaling.launch binds
    try:
        args.torch_settings = [tuple(int(n) for n in s.split("/")) for s in args.torch_settings.split(",")]
    except ValueError:
        parser.error(f"--torch-settings wants INTRA/BLAS pairs such as 1/2, got '{args.torch_settings}'")
    for what, values, valid in (("config", args.configs, CONFIGS), ("grid", args.grids, GRIDS)):
        unknown = [v for v in values if v not in valid]
        if unknown:
            parser.error(f"unknown {what} {', '.join(unknown)}; valid: {', '.join(valid)}")
    if args.rounds < 1:
        parser.error(f"--rounds wants 1 or more, got {args.rounds}")
    if args.steps <= args.warmup:
        parser.error(f"--steps {args.steps} must exceed --warmup {args.warmup}")
    if not args.trident.is_file():
        parser.error(f"no trident executable at {args.trident}; build it (cmake --preset cpu && "
                     "cmake --build --preset cpu) or pass --trident PATH")
    return args


def main():
    args = parse_args()
    env, core = own_blas_kernels(os.environ, args.trident)
    load_before = os.getloadavg()[0]
    rows, blas_seen = [], set()
    try:
        for name in args.configs:
            print(f"running {name} ...", file=sys.stderr, flush=True)
            config_rows, blas = bench_config(args, name, env)
            rows += config_rows
            blas_seen |= blas
    except BenchError as error:
        sys.exit(f"cpu_performance.py: {error}")
    print(f"OpenBLAS core {core} | {args.cores} cores | CPU {cpu_model()} | "
          f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"trident: model.attention = {args.attention}; {' / '.join(sorted(blas_seen))}")
    print("MFU = model GFLOP/s / the sgemm peak the run's ranks measured at start-up (summed); "
          f"MFU for 1.5x = the MFU at which this row would run 1.5x PyTorch's best; "
          f"vs torch = torch's best ms/step / this row's, within each round; medians over steps "
          f"{args.warmup + 1}..{args.steps}, then over {args.rounds} round(s) [lowest, highest]; "
          "torch I/B = intra-op / BLAS threads")
    header = ["config", "run", "ranks×threads", "ms/step", "tokens/s", "GFLOP/s", "MFU", "MFU for 1.5x",
              "peak GFLOP/s", "vs torch"]
    table = [header] + rows
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths)))
    print(shlex.join([sys.executable] + sys.argv))


if __name__ == "__main__":
    main()
