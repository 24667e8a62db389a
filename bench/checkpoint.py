#!/usr/bin/python3
"""Checkpoint and timeline benchmark (issue 5): checkpoint write and read throughput against `dd`,
and the cost of recording the timeline, all measured in the same run.

Checkpoints: input_decks/gpt2-124m.toml (124M parameters: a 1.49 GB file with the AdamW moments)
trained for one short step on 1 rank and on 2 ranks (TP=2: each rank writes its shards' boxes),
then resumed (each rank reads its boxes and verifies the checksums). trident logs the size, the
seconds and MB/s of each write and read; the reference is `dd` writing the same number of bytes
with conv=fsync into the same directory, and reading them back.

Timeline: /steps timeline_s (seconds gathering the step's /events to rank 0 and writing them)
against step_time_s, for the small deck on pp = 2 (2 ranks, one per core) and for the tiny deck on
tp 2 x pp 2 x dp 2 (8 ranks oversubscribing 2 cores: every collective then costs context switches,
the worst case).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
from single_rank import REPO, BenchError, open_timeline, run_checked  # noqa: E402

TRANSFER = re.compile(r"\((?P<mb>[\d.]+) MB in (?P<s>[\d.]+) s, (?P<rate>[\d.]+) MB/s\)")


def trident(args, ranks, deck, run_dir, *overrides, env):
    command = [args.mpirun, "-n", str(ranks), "--oversubscribe", "--bind-to", "none", str(args.trident), "run",
               str(REPO / "input_decks" / deck), "--set", f"output.dir={run_dir}"]
    for o in overrides:
        command += ["--set", o]
    return run_checked(f"trident {deck} on {ranks} rank(s)", command, env)


def transfer(output, prefix):
    for line in output.splitlines():
        if line.lstrip().startswith(prefix):
            match = TRANSFER.search(line)
            if match:
                return float(match["mb"]), float(match["s"])
    raise BenchError(f"no '{prefix}' line with a transfer summary in trident's output")


def dd_rates(directory, megabytes):
    target = Path(directory) / "dd.bin"
    start = time.perf_counter()
    subprocess.run(["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={megabytes}", "conv=fsync"],
                   check=True, capture_output=True)
    write = megabytes * 1.048576 / (time.perf_counter() - start)
    start = time.perf_counter()
    subprocess.run(["dd", f"if={target}", "of=/dev/null", "bs=1M"], check=True, capture_output=True)
    read = megabytes * 1.048576 / (time.perf_counter() - start)
    target.unlink()
    return write, read


def checkpoint_rows(args, env):
    grid = ("parallel.pp=1", "parallel.dp=1", "schedule.microbatches=1", "schedule.micro_batch_size=1",
            "checkpoint.every=0", "output.log_every=1")
    rows = []
    for ranks in (1, 2):
        with tempfile.TemporaryDirectory(prefix="trident-ckpt-", dir=args.dir) as run_dir:
            tp = f"parallel.tp={ranks}"
            written = trident(args, ranks, "gpt2-124m.toml", run_dir, *grid, tp, "train.steps=1", env=env)
            megabytes, write_s = transfer(written, "checkpoint ")
            resumed = trident(args, ranks, "gpt2-124m.toml", run_dir, *grid, tp, "train.steps=1", env=env)
            _, read_s = transfer(resumed, "resume ")
            dd_write, dd_read = dd_rates(run_dir, int(megabytes))
            rows.append((ranks, megabytes, megabytes / write_s, megabytes / read_s, dd_write, dd_read))
    return rows


def timeline_overhead(args, env, ranks, deck, *overrides):
    with tempfile.TemporaryDirectory(prefix="trident-timeline-", dir=args.dir) as run_dir:
        trident(args, ranks, deck, run_dir, f"train.steps={args.timeline_steps}", "checkpoint.every=0", *overrides,
                env=env)
        tl = open_timeline(Path(run_dir))
        share = [float(t) / float(s) for t, s in zip(tl.steps["timeline_s"][1:], tl.steps["step_time_s"][1:])]
        events = len(tl.events["kind"])
    return statistics.median(share), max(share), events / args.timeline_steps


def checkpoint_bench_parser(description, dir_help):
    """The options of the checkpoint benchmarks: the trident binary, mpirun, where the files go."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trident", default=str(REPO / "build" / "cpu" / "src" / "trident"))
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--dir", default=None, help=f"{dir_help} (default: the temp dir)")
    return parser


def one_blas_thread_env(name, args):
    """The environment of the benchmark's runs (one BLAS thread per rank, MPI as root); None, having
    said why, when args.trident is missing."""
    if not Path(args.trident).is_file():
        print(f"{name}: no trident binary at {args.trident}: build it (scripts/setup)", file=sys.stderr)
        return None
    return dict(os.environ, OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def main():
    parser = checkpoint_bench_parser(__doc__, "where checkpoints and the dd file go")
    parser.add_argument("--timeline-steps", type=int, default=20)
    args = parser.parse_args()
    env = one_blas_thread_env("checkpoint", args)
    if env is None:
        return 2
    try:
        rows = checkpoint_rows(args, env)
        timelines = [("small, pp 2 (2 ranks)",
                      timeline_overhead(args, env, 2, "small.toml", "parallel.tp=1", "parallel.pp=2", "parallel.dp=1",
                                        "schedule.microbatches=8", "schedule.micro_batch_size=1")),
                     ("tiny, tp 2 x pp 2 x dp 2 (8 ranks)", timeline_overhead(args, env, 8, "tiny.toml"))]
    except BenchError as error:
        print(f"checkpoint: {error}", file=sys.stderr)
        return 1
    print(f"checkpoint of gpt2-124m (weights + AdamW m and v, float32) in {args.dir or tempfile.gettempdir()}")
    print(f"{'ranks':>5}{'MB':>9}{'write MB/s':>12}{'dd write':>10}{'ratio':>7}{'read MB/s':>11}{'dd read':>9}{'ratio':>7}")
    for ranks, megabytes, write, read, dd_write, dd_read in rows:
        print(f"{ranks:>5}{megabytes:>9.1f}{write:>12.1f}{dd_write:>10.1f}{write / dd_write:>7.2f}"
              f"{read:>11.1f}{dd_read:>9.1f}{read / dd_read:>7.2f}")
    for label, (median_share, worst_share, events_per_step) in timelines:
        print(f"timeline recording, {label}, {events_per_step:.0f} events/step: median {median_share:.3%} of "
              f"step time (worst step {worst_share:.3%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
