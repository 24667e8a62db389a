#!/usr/bin/python3
"""Pipeline benchmark: measured pipeline bubble against theory and the simulator, same run.

Real compute (input_decks/small.toml's model, m micro-batches of B sequences, synthetic data):
  1 rank              the reference (pp=1, 1f1b: forward and backward of each micro-batch in turn)
  pp=2 1f1b, 2 ranks  the same global batch split by layers: ideal ratio 2·(1 - bubble)
  pp=2 zb-h1, 2 ranks the same, zero-bubble H1 (backward split into input and weight gradients)
Every rank runs OpenBLAS with --threads-per-rank threads (default 1) so that 2 ranks use the
machine's 2 cores and the 1-rank reference uses one.

Re-planning an unbalanced split (real compute, the same model and batch on 2 ranks, 1f1b):
  balanced            parallel.stage_layers = "balanced" (the FLOP model's split): the reference
  unbalanced          --unbalanced-split (default [1,5]: the head's stage holds most layers too)
  unbalanced + replan the same with schedule.replan = "once": after step 2 the measured costs move
                      the layers (and may change the schedule); its medians are over the steps
                      after the move
The recovered share is (unbalanced bubble - re-planned bubble) / (unbalanced - balanced bubble).

Emulated compute (input_decks/tiny.toml with [emulate]: every action sleeps, the messages are real):
p ranks for p in --stages, m in --microbatch-counts, each schedule in --schedules, with
F = --forward-ms, B = 2F, I = W = F. Ranks oversubscribe the cores; sleeping ranks leave them free.
Each row: the measured bubble (median of timeline.h5's /steps bubble after --warmup), the textbook
(p - 1)/(m + p - 1) and the simulator's predicted_bubble for the same costs.
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
from single_rank import (REPO, BenchError, open_timeline, own_blas_kernels, run_checked, textbook_bubble,
                         timeline_medians)  # noqa: E402


def env_sh_environment():
    """The environment after sourcing scripts/env.sh (Open MPI as root, oversubscription, no binding)."""
    result = subprocess.run(["bash", "-c", 'source "$1" && env -0', "env", str(REPO / "scripts" / "env.sh")],
                            stdout=subprocess.PIPE, check=True)
    return dict(entry.split("=", 1) for entry in result.stdout.decode().split("\0") if "=" in entry)


def run_pipeline(args, deck, ranks, steps, settings, env, warmup=None):
    """Runs trident on `ranks` ranks with tp = dp = 1, pp = ranks; returns medians (after `warmup`
    steps, default --warmup) and attributes."""
    settings = dict({"parallel.tp": 1, "parallel.pp": ranks, "parallel.dp": 1, "schedule.virtual_stages": 1,
                     "train.steps": steps}, **settings)
    with tempfile.TemporaryDirectory(prefix="trident-pipeline-") as run_dir:
        settings["output.dir"] = run_dir
        command = [args.mpirun, "-n", str(ranks), "--oversubscribe", "--bind-to", "none", str(args.trident),
                   "run", str(deck)]
        command += [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
        run_checked(f"trident pp={ranks} {settings['schedule.kind']} m={settings['schedule.microbatches']}",
                    command, env)
        tl = open_timeline(Path(run_dir))
        missing = [n for n in ("predicted_bubble", "schedule_kind") if n not in tl.attrs]
        if missing:
            raise BenchError(f"{tl.path}: missing root attribute(s) {', '.join(missing)}")
        median = timeline_medians(tl, args.warmup if warmup is None else warmup, "tokens_per_s", "step_time_s",
                                  "bubble")
        model = ", ".join(f"{k} {tl.attrs[k]}" for k in ("layers", "d_model", "heads", "seq_len", "vocab")
                          if k in tl.attrs)
        return dict(median, loss=float(tl.steps["loss"][-1]), predicted_bubble=tl.predicted_bubble,
                    schedule_kind=tl.schedule, p=tl.p, m=tl.m, steps=steps, model=model,
                    stage_layers=str(tl.attrs.get("stage_layers", "")), replans=str(tl.attrs.get("replans", "")),
                    blas_core=str(tl.attrs.get("blas_core", "?")))


def real_part(args, env):
    settings = {"schedule.microbatches": args.microbatches, "schedule.micro_batch_size": args.micro_batch_size,
                "emulate.enabled": "false"}
    deck = REPO / "input_decks" / "small.toml"
    load = os.getloadavg()[0]  # other jobs on the cores skew the 2-rank runs more than the 1-rank one
    one = run_pipeline(args, deck, 1, args.real_steps, dict(settings, **{"schedule.kind": "1f1b"}), env)
    rows = [("1 rank", one)]
    for kind in ("1f1b", "zb-h1"):
        rows.append((f"pp=2 {kind}", run_pipeline(args, deck, 2, args.real_steps,
                                                  dict(settings, **{"schedule.kind": kind}), env)))
    m = args.microbatches
    print(f"real compute: input_decks/small.toml ({one['model']}), m {m} x B {args.micro_batch_size}, "
          f"{args.real_steps} steps (median after {args.warmup}), OPENBLAS_NUM_THREADS={args.threads_per_rank} "
          f"per rank, OpenBLAS core {one['blas_core']}, load average {load:.1f} "
          f"on {os.cpu_count()} CPUs before the runs")
    print(f"{'run':<14}{'tokens/s':>10}{'ms/step':>10}{'vs 1 rank':>11}{'p(1-sim)':>10}{'bubble':>9}"
          f"{'textbook':>10}{'simulator':>11}{'loss':>8}")
    for name, r in rows:
        p = r["p"]
        print(f"{name:<14}{r['tokens_per_s']:>10.0f}{r['step_time_s'] * 1e3:>10.1f}"
              f"{r['tokens_per_s'] / one['tokens_per_s']:>11.2f}{p * (1 - r['predicted_bubble']):>10.2f}"
              f"{r['bubble']:>9.1%}{textbook_bubble(p, m):>10.1%}{r['predicted_bubble']:>11.1%}{r['loss']:>8.3f}")
        if r["schedule_kind"] not in name and p > 1:
            print(f"  note: {name} ran schedule {r['schedule_kind']}")


def rebalance_part(args, env):
    settings = {"schedule.microbatches": args.microbatches, "schedule.micro_batch_size": args.micro_batch_size,
                "emulate.enabled": "false", "schedule.kind": "1f1b"}
    deck = REPO / "input_decks" / "small.toml"
    steps = args.real_steps + 3  # re-planning after step 2, its checkpoint and the first step after the move
    load = os.getloadavg()[0]
    runs = [("balanced", run_pipeline(args, deck, 2, steps, dict(settings, **{"parallel.stage_layers": '"balanced"'}),
                                      env)),
            ("unbalanced", run_pipeline(args, deck, 2, steps,
                                        dict(settings, **{"parallel.stage_layers": args.unbalanced_split}), env)),
            ("unbalanced + replan", run_pipeline(args, deck, 2, steps,
                                                 dict(settings, **{"parallel.stage_layers": args.unbalanced_split,
                                                                   "schedule.replan": '"once"'}), env, warmup=3))]
    print(f"re-planning an unbalanced split: input_decks/small.toml ({runs[0][1]['model']}), pp 2, 1f1b, "
          f"m {args.microbatches} x B {args.micro_batch_size}, {steps} steps (medians after {args.warmup}; "
          f"after 3 for the re-planned run), OPENBLAS_NUM_THREADS={args.threads_per_rank} per rank, "
          f"OpenBLAS core {runs[0][1]['blas_core']}, load average {load:.1f} before")
    print(f"{'run':<22}{'layers':>8}{'schedule':>10}{'ms/step':>10}{'bubble':>9}{'loss':>8}")
    for name, r in runs:
        print(f"{name:<22}{r['stage_layers']:>8}{r['schedule_kind']:>10}{r['step_time_s'] * 1e3:>10.1f}"
              f"{r['bubble']:>9.1%}{r['loss']:>8.3f}")
    balanced, unbalanced, replanned = (r for _, r in runs)
    added = unbalanced["bubble"] - balanced["bubble"]
    recovered = (unbalanced["bubble"] - replanned["bubble"]) / added if added > 0 else float("nan")
    print(f"the imbalance adds {added:.1%} of bubble; re-planning recovers {recovered:.0%} of it "
          f"(step time {unbalanced['step_time_s'] / replanned['step_time_s']:.2f}x faster than unbalanced)")
    print(f"  {replanned['replans']}")


V_SHAPE_KINDS = ("zb-v", "v-half", "dualpipev")  # two chunks per rank, one layer each


def emulated_steps(args, m):
    """--steps for m <= 16, half for m = 32, a quarter for m = 64; never fewer than warm-up + 2."""
    return max(args.warmup + 2, args.steps * 16 // max(m, 16))


def emulated_part(args, env):
    F = args.forward_ms
    deck = REPO / "input_decks" / "tiny.toml"
    print(f"emulated compute: input_decks/tiny.toml, layers = p (2p for the V shapes), micro_batch_size 1, F {F:g} ms, B {2 * F:g} ms, "
          f"I {F:g} ms, W {F:g} ms; ranks = p, oversubscribed on {os.cpu_count()} CPUs; "
          f"steps per row (median after {args.warmup})")
    print(f"{'p':>3}{'m':>5}  {'schedule':<9}{'steps':>6}{'bubble':>9}{'textbook':>10}{'simulator':>11}"
          f"{'vs textbook':>13}{'vs simulator':>14}")
    for p in args.stages:
        for m in args.microbatch_counts:
            for kind in args.schedules:
                steps = emulated_steps(args, m)
                chunks = 2 if kind in V_SHAPE_KINDS else 1
                settings = {"model.layers": p * chunks, "schedule.kind": kind, "schedule.microbatches": m,
                            "schedule.virtual_stages": chunks,
                            "schedule.micro_batch_size": 1, "emulate.enabled": "true",
                            "emulate.forward_ms": F, "emulate.backward_ms": 2 * F,
                            "emulate.input_grad_ms": F, "emulate.weight_grad_ms": F}
                r = run_pipeline(args, deck, p, steps, settings, env)
                theory = textbook_bubble(p, m)
                print(f"{p:>3}{m:>5}  {r['schedule_kind']:<9}{steps:>6}{r['bubble']:>9.1%}{theory:>10.1%}"
                      f"{r['predicted_bubble']:>11.1%}{r['bubble'] - theory:>+13.1%}"
                      f"{r['bubble'] - r['predicted_bubble']:>+14.1%}", flush=True)


def int_list(text):
    return [int(x) for x in text.split(",") if x]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trident", default=str(REPO / "build" / "cpu" / "src" / "trident"))
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke subset (about a minute): 2 real steps, p 8, m 8 and 16, 3 emulated steps")
    parser.add_argument("--parts", default="real,rebalance,emulated")
    parser.add_argument("--unbalanced-split", default="[1,5]", help="rebalance part: parallel.stage_layers")
    parser.add_argument("--steps", type=int, default=None, help="emulated steps for m <= 16 (default 10)")
    parser.add_argument("--real-steps", type=int, default=None, help="real-compute steps (default 6)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads-per-rank", type=int, default=1)
    parser.add_argument("--microbatches", type=int, default=8, help="real compute: m")
    parser.add_argument("--micro-batch-size", type=int, default=1, help="real compute: sequences per micro-batch")
    parser.add_argument("--forward-ms", type=float, default=10.0)
    parser.add_argument("--stages", type=int_list, default=None, help="emulated p values (default 8,16)")
    parser.add_argument("--microbatch-counts", type=int_list, default=None,
                        help="emulated m values (default 8,16,32,64)")
    parser.add_argument("--schedules", type=lambda s: [x for x in s.split(",") if x], default=["1f1b", "zb-h1"])
    args = parser.parse_args()
    quick = args.quick
    args.steps = args.steps if args.steps is not None else (3 if quick else 10)
    args.real_steps = args.real_steps if args.real_steps is not None else (2 if quick else 6)
    args.stages = args.stages or ([8] if quick else [8, 16])
    args.microbatch_counts = args.microbatch_counts or ([8, 16] if quick else [8, 16, 32, 64])
    parts = [x for x in args.parts.split(",") if x]
    if not set(parts) <= {"real", "rebalance", "emulated"}:
        parser.error(f"--parts: any of real, rebalance, emulated, not {args.parts}")
    if args.real_steps <= args.warmup or args.steps <= args.warmup:
        parser.error(f"--steps and --real-steps must exceed --warmup ({args.warmup})")
    if not Path(args.trident).is_file():
        print(f"pipeline: no trident binary at {args.trident}: build it (scripts/setup)", file=sys.stderr)
        return 2
    for deck in ("small.toml", "tiny.toml"):
        if not (REPO / "input_decks" / deck).is_file():
            print(f"pipeline: no deck input_decks/{deck}", file=sys.stderr)
            return 2
    env = dict(own_blas_kernels(env_sh_environment(), args.trident)[0], OPENBLAS_NUM_THREADS=str(args.threads_per_rank),
               OMP_NUM_THREADS=str(args.threads_per_rank))
    try:
        for name, part in (("real", real_part), ("rebalance", rebalance_part), ("emulated", emulated_part)):
            if name in parts:
                part(args, env)
                print()
    except BenchError as error:
        print(f"pipeline: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
