#!/usr/bin/python3
"""`trident plan --machine input_decks/machines/cpu-2core.toml` against trident's own runs on this
machine (issue 21, item 5), same invocation: for each configuration, the predicted step time (the
JSON's step_time_s) and the measured one (median of timeline.h5's /steps step_time_s after the
warm-up), and for emulated pipelines the predicted bubble against the measured.

Real compute: input_decks/small.toml and input_decks/gpt2-124m.toml (T = 256, B = 4: a step of
seconds) on 1 rank and on 2 ranks (tp 2, dp 2, pp 2 with m 8), one OpenBLAS thread per rank
(a device of the machine file is a core), OPENBLAS_CORETYPE unset (the file's peak is this CPU's
AVX-512 sgemm). Emulated: input_decks/tiny.toml with [emulate] (F 10 ms, B 20, I = W = 10) at
p = 8 and 16 ranks, m = 2p, 1f1b and zb-h1: the machine only carries the messages.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pipeline import env_sh_environment  # noqa: E402
from single_rank import REPO, BenchError, open_timeline, own_blas_kernels, run_checked, timeline_medians  # noqa: E402

MACHINE = REPO / "input_decks" / "machines" / "cpu-2core.toml"
GPT2_SHORT = {"model.seq_len": 256, "schedule.micro_batch_size": 4, "schedule.microbatches": 1}
REAL = [  # (label, deck, ranks, overrides)
    ("small 1 rank", "small.toml", 1, {}),
    ("small tp 2", "small.toml", 2, {"parallel.tp": 2}),
    ("small dp 2", "small.toml", 2, {"parallel.dp": 2, "schedule.micro_batch_size": 4}),
    ("small pp 2 m 8", "small.toml", 2, {"parallel.pp": 2, "schedule.microbatches": 8, "schedule.micro_batch_size": 1}),
    ("gpt2 T256 1 rank", "gpt2-124m.toml", 1, GPT2_SHORT),
    ("gpt2 T256 tp 2", "gpt2-124m.toml", 2, dict(GPT2_SHORT, **{"parallel.tp": 2})),
]
EMULATED = [(p, kind) for p in (8, 16) for kind in ("1f1b", "zb-h1")]


def settings_for(ranks_overrides, steps, run_dir):
    settings = {"parallel.tp": 1, "parallel.pp": 1, "parallel.dp": 1, "train.steps": steps, "output.dir": run_dir,
                "checkpoint.every": 0}
    settings.update(ranks_overrides)
    return [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]


def predicted(args, deck, sets):
    proc = subprocess.run([args.trident, "plan", str(deck), "--machine", str(MACHINE), "--json", *sets],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"trident plan {deck}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def measure(args, env, label, deck, ranks, overrides, steps):
    with tempfile.TemporaryDirectory(prefix="trident-predict-") as run_dir:
        sets = settings_for(overrides, steps, run_dir)
        run_checked(label, [args.mpirun, "-n", str(ranks), "--oversubscribe", "--bind-to",
                            "core" if ranks <= (os.cpu_count() or 1) else "none", args.trident, "run", str(deck),
                            *sets], env)
        tl = open_timeline(Path(run_dir))
        measured = timeline_medians(tl, args.warmup, "step_time_s", "bubble")
        return measured, predicted(args, deck, sets), str(tl.attrs.get("blas_core", "?"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trident", default=str(REPO / "build" / "cpu" / "src" / "trident"))
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--parts", default="real,emulated")
    args = parser.parse_args()
    if not Path(args.trident).is_file():
        print(f"predict_cpu: no trident binary at {args.trident}: build it (scripts/setup)", file=sys.stderr)
        return 2
    env = dict(own_blas_kernels(env_sh_environment(), args.trident)[0], OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    load = os.getloadavg()[0]
    try:
        if "real" in args.parts:
            print(f"real compute, {args.steps} steps (median after {args.warmup}), 1 BLAS thread per rank, "
                  f"load average {load:.1f} before; machine file {MACHINE.relative_to(REPO)}")
            print(f"{'configuration':<18}{'core':>11}{'measured':>11}{'predicted':>11}{'error':>8}")
            for label, deck, ranks, overrides in REAL:
                m, p, core = measure(args, env, label, REPO / "input_decks" / deck, ranks, overrides, args.steps)
                error = p["step_time_s"] / m["step_time_s"] - 1
                print(f"{label:<18}{core:>11}{m['step_time_s'] * 1e3:>9.0f}ms{p['step_time_s'] * 1e3:>9.0f}ms"
                      f"{error:>+8.1%}", flush=True)
        if "emulated" in args.parts:
            print(f"\nemulated (F 10 ms, B 20, I = W = 10), m = 2p, {args.steps} steps")
            print(f"{'p':>3}{'m':>4}  {'schedule':<8}{'measured bubble':>17}{'predicted':>11}{'difference':>12}")
            for p_, kind in EMULATED:
                overrides = {"parallel.pp": p_, "model.layers": p_, "schedule.kind": kind,
                             "schedule.microbatches": 2 * p_, "schedule.micro_batch_size": 1,
                             "emulate.enabled": "true"}
                m, p, _ = measure(args, env, f"emulated p {p_} {kind}", REPO / "input_decks" / "tiny.toml", p_,
                                  overrides, args.steps)
                print(f"{p_:>3}{2 * p_:>4}  {kind:<8}{m['bubble']:>17.1%}{p['bubble']:>11.1%}"
                      f"{m['bubble'] - p['bubble']:>+12.1%}", flush=True)
    except BenchError as error:
        print(f"predict_cpu: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
