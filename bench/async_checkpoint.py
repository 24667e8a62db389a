#!/usr/bin/python3
"""Checkpoints that do not stop training (issue 41, item 2): what a save costs the training when it
is synchronous and when it is written in the background (checkpoint.async), measured in one run of
this script against the same training without saves.

GPT-2 124M's shape (a 1.49 GB checkpoint with the AdamW moments) at T = 64, B = 1 on one rank with
one BLAS thread (the other core is free for the background writer, as a GPU node's host cores are
while the GPU computes), for --steps steps, three runs:
  none   checkpoint.every = 0 (the final save after the last step is left out of every figure)
  sync   checkpoint.every = --every: training stops for each save (CKPT_BLOCKED in the timeline)
  async  the same with checkpoint.async = true: training stops for the host copy and the commit
         (CKPT_BLOCKED), the data is written beside the next steps (CKPT_WRITE)
Figures, from the timelines: the median step without saves; per save the seconds training stopped;
the steps that overlapped a background write against the median step without saves; and the
training time each save costs (stops, plus the overlapped steps' excess), sync over async.
"""
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checkpoint import checkpoint_bench_parser, one_blas_thread_env  # noqa: E402
from single_rank import REPO, BenchError, open_timeline, run_checked  # noqa: E402

SHAPE = ("parallel.tp=1", "parallel.pp=1", "parallel.dp=1", "model.seq_len=64", "schedule.microbatches=1",
         "schedule.micro_batch_size=1", "output.log_every=1")


def train(args, env, run_dir, *overrides):
    command = [args.mpirun, "-n", "1", "--bind-to", "none", str(args.trident), "run",
               str(REPO / "input_decks" / "gpt2-124m.toml"), "--set", f"output.dir={run_dir}",
               "--set", f"train.steps={args.steps}"]
    for o in SHAPE + overrides:
        command += ["--set", o]
    run_checked("trident " + " ".join(overrides), command, env)
    return open_timeline(Path(run_dir))


def save_figures(tl, steps):
    """(step times by step, [seconds stopped], [seconds of the stops that start a save], [(write
    start, end)] of background writes), the final save (after step `steps`) left out. A background
    save's first stop is its host copy and the file's creation; its second, under a later step,
    waits for the write and commits."""
    ev = tl.events
    step_times = dict(zip((int(s) for s in tl.steps["step"]), (float(t) for t in tl.steps["step_time_s"])))
    before_final = ev["t_end"] < ev["t_start"][ev["step"] == steps].max()
    blocked = np.flatnonzero((ev["kind"] == "CKPT_BLOCKED") & before_final)
    writes = np.flatnonzero((ev["kind"] == "CKPT_WRITE") & before_final)
    seconds = [float(ev["t_end"][i] - ev["t_start"][i]) for i in blocked]
    starting = [float(ev["t_end"][i] - ev["t_start"][i]) for i in blocked
                if any(ev["step"][w] == ev["step"][i] and ev["t_start"][w] >= ev["t_end"][i] for w in writes)]
    intervals = [(float(ev["t_start"][i]), float(ev["t_end"][i])) for i in writes]
    return step_times, seconds, starting, intervals


def overlapped_steps(tl, intervals):
    """The steps whose compute overlaps a background write."""
    ev = tl.events
    compute = np.isin(ev["kind"], ("F", "B", "OPTIMIZER"))
    found = set()
    for step in np.unique(ev["step"][compute]):
        mine = compute & (ev["step"] == step)
        lo, hi = float(ev["t_start"][mine].min()), float(ev["t_end"][mine].max())
        if any(start < hi and end > lo for start, end in intervals):
            found.add(int(step))
    return found


def main():
    parser = checkpoint_bench_parser(__doc__, "where the checkpoints go")
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--every", type=int, default=8)
    args = parser.parse_args()
    env = one_blas_thread_env("async_checkpoint", args)
    if env is None:
        return 2
    env.pop("OPENBLAS_CORETYPE", None)
    every = f"checkpoint.every={args.every}"
    try:
        timelines = {}
        for name, overrides in (("none", ("checkpoint.every=0",)), ("sync", (every,)),
                                ("async", (every, "checkpoint.async=true"))):
            with tempfile.TemporaryDirectory(prefix="trident-async-ckpt-", dir=args.dir) as run_dir:
                timelines[name] = train(args, env, run_dir, *overrides)
    except BenchError as error:
        print(f"async_checkpoint: {error}", file=sys.stderr)
        return 1

    base_times, _, _, _ = save_figures(timelines["none"], args.steps)
    base = statistics.median(t for s, t in base_times.items() if s > 1)
    _, sync_stops, _, _ = save_figures(timelines["sync"], args.steps)
    async_times, async_stops, copies, writes = save_figures(timelines["async"], args.steps)
    overlapped = sorted(overlapped_steps(timelines["async"], writes))
    excess = sum(max(async_times[s] - base, 0.0) for s in overlapped)
    saves = len(sync_stops)
    if not saves or len(copies) != saves:
        print(f"async_checkpoint: {saves} synchronous and {len(copies)} background saves before the last step: "
              f"raise --steps", file=sys.stderr)
        return 1
    written = [end - start for start, end in writes]
    tl = timelines["none"]
    print(f"gpt2-124m shape, T 64, B 1, 1 rank, 1 BLAS thread, core {tl.attrs.get('blas_core', '?')}; "
          f"{args.steps} steps, a save every {args.every} ({saves} saves measured; the final one left out)")
    print(f"  step without saves (median after step 1)      {base * 1e3:9.1f} ms")
    print(f"  sync:  training stopped per save                {statistics.median(sync_stops):9.3f} s "
          f"(= {statistics.median(sync_stops) / base:.1f} steps)")
    print(f"  async: training stopped per save                {sum(async_stops) / saves:9.3f} s "
          f"(= {sum(async_stops) / saves / base:.2f} steps), of which the host copy and the file's creation "
          f"{statistics.median(copies):.3f} s; the background write took {statistics.median(written):.3f} s")
    if overlapped:
        ratio = statistics.median(async_times[s] for s in overlapped) / base
        print(f"  async: steps overlapping a write {overlapped}: median {ratio:.2f}x the step without saves")
    lost_sync = sum(sync_stops) / saves
    lost_async = (sum(async_stops) + excess) / saves
    print(f"  training time lost per save: sync {lost_sync:.3f} s, async {lost_async:.3f} s "
          f"(stops + overlapped steps' excess): async loses {lost_async / lost_sync:.1%} of sync's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
