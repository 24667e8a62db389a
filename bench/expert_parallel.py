#!/usr/bin/python3
"""Expert parallelism (issue 39) on this machine, measured in one run: a mixture of experts
([model.moe]) trained on two data-parallel ranks with the experts replicated (ep 1) against split
over both (ep 2), in rounds (this machine's speed drifts: each ratio is formed within a round;
median and range over rounds).

Per configuration: the step time (median after the first step), the time the largest rank was
blocked in the all-to-alls (/steps/ep_comm_s), the bytes its all-to-alls sent per step (the
timeline's ALLTOALL_EP events), the busiest expert's tokens over the mean (/steps/expert_load: 1 is
a perfect balance), and the planned memory per rank (`trident plan`'s table): the weights,
gradients and AdamW state, where ep 2 holds half the experts, and the activations and workspace,
where ep 2 keeps room for every row its experts may receive (dropless: both ranks' all).

The model: Llama shape, --layers, --d-model, 4 heads on 2 kv heads, --experts experts of
--expert-ffn, top 2, every layer a mixture, vocabulary 4096, synthetic data; each rank one BLAS
thread (two ranks on the cores). OPENBLAS_CORETYPE is unset (the machine's own GEMM kernels) unless
--keep-coretype; the core type that ran is printed.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from single_rank import REPO, BenchError, open_timeline, own_blas_kernels, run_checked, spread  # noqa: E402

DECK = REPO / "input_decks" / "moe-tiny.toml"


def overrides(args, ep, steps, run_dir=None):
    settings = {"model.layers": args.layers, "model.d_model": args.d_model, "model.heads": 4, "model.kv_heads": 2,
                "model.seq_len": args.seq_len, "model.vocab": 4096, "model.moe.experts": args.experts,
                "model.moe.top_k": 2, "model.moe.expert_ffn_hidden": args.expert_ffn, "model.moe.layer_freq": 1,
                "parallel.tp": 1, "parallel.pp": 1, "parallel.dp": 2, "parallel.ep": ep,
                "schedule.microbatches": args.microbatches, "schedule.micro_batch_size": args.micro_batch_size,
                "train.steps": steps, "train.warmup_steps": 0, "checkpoint.every": 0, "data.kind": "synthetic"}
    if run_dir is not None:
        settings["output.dir"] = run_dir
    return [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]


UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def planned_mib(args, ep):
    """(weights + gradients + AdamW, activations + workspace) in MiB: stage 0's row of the plan's
    "Memory per rank" table."""
    text = run_checked(f"trident plan ep={ep}", [args.trident, "plan", str(DECK), *overrides(args, ep, 1)], os.environ)
    lines = text.split("\nMemory per rank")[1].splitlines()
    header = re.split(r"\s{2,}", lines[1].strip())
    values = re.split(r"\s{2,}", lines[2].strip())
    row = dict(zip(header, values))

    def mib(column):
        number, unit = row[column].split()
        return float(number) * UNITS[unit] / (1 << 20)

    return mib("weights") + mib("grads") + mib("AdamW m+v"), mib("activations") + mib("workspace")


def train(args, env, ep):
    """One training run on two ranks; its steps, events and root attributes."""
    run_env = dict(env, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory(prefix="trident-ep-") as run_dir:
        command = [args.mpirun, "-n", "2", "--bind-to", "none", args.trident, "run", str(DECK),
                   *overrides(args, ep, args.steps, run_dir)]
        run_checked(f"trident ep={ep}", command, run_env)
        timeline = open_timeline(Path(run_dir))
        return timeline.steps, timeline.events, timeline.attrs


def measure(args, env, ep):
    steps, events, attrs = train(args, env, ep)
    sent = (events["kind"] == "ALLTOALL_EP") & (events["step"] == args.steps) & (events["rank"] == 0)
    return {"step": float(np.median(steps["step_time_s"][1:])), "exposed": float(np.median(steps["ep_comm_s"][1:])),
            "bytes": int(events["bytes"][sent].sum()), "load": float(np.median(steps["expert_load"][1:])),
            "core": attrs.get("blas_core")}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trident", default=str(REPO / "build" / "cpu" / "src" / "trident"))
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--expert-ffn", type=int, default=512)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--micro-batch-size", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep-coretype", action="store_true", help="leave OPENBLAS_CORETYPE as it is")
    args = parser.parse_args()
    if not Path(args.trident).is_file():
        print(f"expert_parallel: no trident binary at {args.trident}: build it (scripts/setup)", file=sys.stderr)
        return 2
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    if not args.keep_coretype:
        env = own_blas_kernels(env, args.trident)[0]
    print(f"OPENBLAS_CORETYPE={env.get('OPENBLAS_CORETYPE', 'unset (the machine own kernels)')}; Llama L={args.layers} "
          f"C={args.d_model}, {args.experts} experts of F {args.expert_ffn}, top 2, T={args.seq_len}, "
          f"{args.microbatches} x {args.micro_batch_size} sequences per rank, dp 2")
    try:
        rounds = []
        for number in range(args.rounds):
            one, two = measure(args, env, 1), measure(args, env, 2)
            rounds.append((one, two))
            print(f"  round {number + 1}: ep 1 {one['step'] * 1e3:.0f} ms, ep 2 {two['step'] * 1e3:.0f} ms "
                  f"(all-to-all blocked {two['exposed'] * 1e3:.1f} ms; core {two['core']})", flush=True)
        memory = {ep: planned_mib(args, ep) for ep in (1, 2)}
    except (BenchError, subprocess.CalledProcessError) as error:
        print(f"expert_parallel: {error}", file=sys.stderr)
        return 1
    print(f"{'':>6}{'step (ms)':>18}{'all-to-all blocked / step':>28}{'MiB sent/step/rank':>20}"
          f"{'expert load':>20}{'planned MiB: state':>20}{'activations':>13}")
    for ep, index in ((1, 0), (2, 1)):
        runs = [r[index] for r in rounds]
        print(f"{'ep ' + str(ep):>6}{spread([r['step'] * 1e3 for r in runs], '.0f'):>18}"
              f"{spread([r['exposed'] / r['step'] for r in runs], '.3f'):>28}{runs[-1]['bytes'] / (1 << 20):>20.2f}"
              f"{spread([r['load'] for r in runs], '.2f'):>20}{memory[ep][0]:>20.1f}{memory[ep][1]:>13.1f}")
    print(f"  ep 1 / ep 2 step time: {spread([r[0]['step'] / r[1]['step'] for r in rounds], '.2f')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
