#!/usr/bin/python3
"""Where a training step's time goes (issue 19, item 2): a linux-perf profile of trident, by kind of work.

Records trident on one rank, or on --tp N ranks under mpirun (GPT-2 124M at T = 256, B = 4 by
default: a config of bench/single_rank.py) with `perf record --call-graph dwarf`, then files every sample under one kind
by its innermost frame and, for matrix products, by the trident function that called the BLAS:
GEMMs of the linear layers' forward, input gradient and weight gradient, of attention and of the
vocabulary head; attention outside GEMMs (the softmax and tile kernels); norms; activation
functions; the residual adds; AdamW and the gradient norm; the embedding; cross-entropy; copies
(memcpy, memset, copy kernels); communication (MPI); the first touch of memory allocated in step
1. Start-up (parameter initialisation, the sgemm peak measurement) and the checkpoint and timeline
writes after the last step are left out of the shares. With --blas-threads 1 (the default) every sample
is trident's own thread and attributable; with more, the BLAS's worker threads count as "GEMM (BLAS
worker threads)".

  /usr/bin/python3 bench/profile_breakdown.py [--config gpt2] [--steps 3] [--attention tiled] [--detail N]
      [--tp 2 [--set parallel.sequence_parallel=true]]
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from single_rank import (CONFIGS, REPO, BenchError, cpu_model, own_blas_kernels, run_checked,  # noqa: E402
                         trident_overrides)

# The trident function that called the BLAS, first match from the innermost frame outwards.
GEMM_CALLERS = [
    ("measure_gemm_peak", "start-up"),
    ("init_parameters", "start-up"),
    ("attention", "GEMM attention (scores, P·V and their gradients)"),
    ("gemm_strided_batched", "GEMM attention (scores, P·V and their gradients)"),  # attention's heads only
    ("tied_head", "GEMM vocabulary head"),
    ("vocab_parallel", "GEMM vocabulary head"),
    ("head_", "GEMM vocabulary head"),
    ("linear_forward", "GEMM linear layers, forward"),
    ("input_grad", "GEMM linear layers, input gradients"),
    ("linear_backward_input", "GEMM linear layers, input gradients"),
    ("linear_backward_weight", "GEMM linear layers, weight gradients"),
]
# Kinds of the other samples, by a name in their innermost trident frames (first match wins).
KERNELS = [
    ("measure_gemm_peak", "start-up"),
    ("init_parameters", "start-up"),
    ("H5", "start-up"),
    ("tiled_attention", "attention outside GEMMs (softmax, tiles)"),
    ("online_softmax", "attention outside GEMMs (softmax, tiles)"),
    ("tile_probabilities", "attention outside GEMMs (softmax, tiles)"),
    ("tile_score_grads", "attention outside GEMMs (softmax, tiles)"),
    ("output_dots", "attention outside GEMMs (softmax, tiles)"),
    ("finish_rows", "attention outside GEMMs (softmax, tiles)"),
    ("tiled_forward", "attention outside GEMMs (softmax, tiles)"),
    ("tiled_backward", "attention outside GEMMs (softmax, tiles)"),
    ("explicit_backward", "attention outside GEMMs (softmax, tiles)"),
    ("causal_softmax", "attention outside GEMMs (softmax, tiles)"),
    ("layernorm", "norms"),
    ("rmsnorm", "norms"),
    ("gelu", "activation functions"),
    ("swiglu", "activation functions"),
    ("rope", "RoPE"),
    ("residual", "residual adds"),
    ("bias_grad", "bias gradients"),
    ("accumulate_column_sums", "bias gradients"),
    ("fill_rows_with_bias", "bias gradients"),
    ("adamw", "AdamW + gradient norm"),
    ("AdamW", "AdamW + gradient norm"),
    ("sum_of_squares", "AdamW + gradient norm"),
    ("encoder", "embedding"),
    ("cross_entropy", "cross-entropy"),
    ("copy", "copies"),
    ("zero_floats", "copies"),
    ("deep_copy", "copies"),
    ("memcpy", "copies"),
    ("memset", "copies"),
    ("memmove", "copies"),
]
COMMUNICATION = re.compile(r"libmpi|libopen-pal|libopen-rte|mca_|libucp|libfabric", re.I)
BLAS = re.compile(r"libblas|openblas", re.I)


def classify(frames, main_thread):
    """frames: (symbol, dso) innermost first."""
    symbol, dso = frames[0]
    if any(s.startswith("H5") or "checkpoint" in s or "slice_checksum" in s for s, _ in frames):
        return "checkpoint and timeline writes (after the steps)"
    if any(s in ("exc_page_fault", "asm_exc_page_fault") for s, _ in frames):
        return "first touch of new memory (page faults, step 1)"
    if COMMUNICATION.search(dso) or COMMUNICATION.search(symbol):
        return "communication"
    if BLAS.search(dso):
        for sym, _ in frames:
            for name, kind in GEMM_CALLERS:
                if name in sym:
                    return kind
        return "GEMM other" if main_thread else "GEMM (BLAS worker threads)"
    for sym, _ in frames:
        if "trident" not in sym and not sym.startswith(("mem", "__mem", "Kokkos")):
            continue
        for name, kind in KERNELS:
            if name in sym:
                return kind
    if "kernel" in dso or symbol.startswith("[k]"):
        return "operating system"
    return "other"


def samples(perf_data):
    """(frames, thread id, process id) per sample, from `perf script`."""
    script = subprocess.run(["perf", "script", "-i", str(perf_data), "-F", "pid,tid,ip,sym,dso"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True).stdout
    for block in script.split("\n\n"):
        lines = [line.strip() for line in block.strip().splitlines()]
        if len(lines) < 2:
            continue
        ids = lines[0].split()[0]
        pid, tid = (int(x) for x in ids.split("/")) if "/" in ids else (int(ids), int(ids))
        frames = []
        for line in lines[1:]:
            parts = line.split(None, 1)
            rest = parts[1] if len(parts) > 1 else ""
            dso = rest[rest.rfind("(") + 1:-1] if rest.endswith(")") else ""
            symbol = rest[:rest.rfind("(")].strip() if rest.endswith(")") else rest
            frames.append((symbol, dso))
        yield frames, tid, pid


def record(args, cfg, env, perf_data):
    """perf follows the launcher's children: with --tp 2 both ranks' samples are in perf_data."""
    with tempfile.TemporaryDirectory(prefix="trident-profile-") as run_dir:
        command = ["perf", "record", "-F", str(args.frequency), "--call-graph", "dwarf,16384", "-o", str(perf_data),
                   "--"]
        if args.tp > 1:
            command += [args.mpirun, "-n", str(args.tp), "--map-by", "slot:PE=1", "--bind-to", "core"]
        command += [str(args.trident), "run", str(REPO / "input_decks" / "small.toml")]
        command += trident_overrides(cfg, args.steps, run_dir) + ["--set", f"model.attention={args.attention}",
                                                                  "--set", f"parallel.tp={args.tp}"]
        for setting in args.set:
            command += ["--set", setting]
        run_checked("perf record", command, env)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="gpt2", choices=sorted(CONFIGS))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--attention", choices=("tiled", "explicit"), default="tiled")
    parser.add_argument("--blas-threads", type=int, default=1, help="per rank (default 1)")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks, one core each (default 1)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a further deck override, e.g. parallel.sequence_parallel=true (repeatable)")
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--frequency", type=int, default=199, help="samples per second (default 199)")
    parser.add_argument("--detail", type=int, default=0, help="also list each kind's N most sampled functions")
    parser.add_argument("--trident", type=Path, default=REPO / "build" / "cpu" / "src" / "trident")
    args = parser.parse_args()
    env, core = own_blas_kernels(os.environ, args.trident)
    env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(args.blas_threads)
    cfg = CONFIGS[args.config]
    with tempfile.TemporaryDirectory(prefix="trident-perf-") as work:
        perf_data = Path(work) / "perf.data"
        try:
            record(args, cfg, env, perf_data)
        except BenchError as error:
            sys.exit(f"profile_breakdown.py: {error}")
        counts, symbols = collections.Counter(), collections.defaultdict(collections.Counter)
        for frames, tid, pid in samples(perf_data):
            kind = classify(frames, tid == pid)
            counts[kind] += 1
            symbols[kind][frames[0][0][:90]] += 1
    for outside_steps in ("start-up", "checkpoint and timeline writes (after the steps)"):
        counts.pop(outside_steps, None)
    total = sum(counts.values())
    ranks = "one rank" if args.tp == 1 else f"tp {args.tp} (one core per rank, samples of all ranks)"
    print(f"{args.config}: T={cfg['seq_len']} B={cfg['batch']}, model.attention={args.attention}, {ranks}, "
          f"{' '.join(args.set)}{', ' if args.set else ''}"
          f"{args.blas_threads} BLAS thread(s), OpenBLAS core {core}, CPU {cpu_model()}; "
          f"{total} samples at {args.frequency} Hz over {args.steps} steps (start-up left out)")
    gemm = sum(n for kind, n in counts.items() if kind.startswith("GEMM"))
    for kind, n in counts.most_common():
        print(f"  {100 * n / total:5.1f}%  {kind}")
        if args.detail:
            for symbol, m in symbols[kind].most_common(args.detail):
                print(f"           {100 * m / total:5.1f}%  {symbol}")
    print(f"  {100 * gemm / total:5.1f}%  all GEMMs; {100 * (total - gemm) / total:.1f}% outside them")


if __name__ == "__main__":
    main()
