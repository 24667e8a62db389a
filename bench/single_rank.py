#!/usr/bin/python3
"""Single-rank benchmark (issues 2 and 8): trident against the GEMM peak and against PyTorch.

For each config, trains with trident for a few steps, reads <run dir>/timeline.h5, then trains the
same model with bench/pytorch_model.py under the same thread count and OPENBLAS_CORETYPE, and prints
one table row. Steps before --warmup are left out; times are medians.

--device cuda runs trident's GPU build (build/cuda) and PyTorch on the same GPU; MFU is then
against the bf16 GEMM peak that the PyTorch side measures on that GPU in the same run. The default
config there is GPT-2 124M at T = 1024. --torch names the PyTorch runs to compare with, each
MATMUL-ATTENTION[-compile]: fp32, tf32 or bf16 (autocast) products, the explicit softmax or
torch's fused SDPA, optionally under torch.compile; every one is timed in the same run and gets its
own column. --json PATH also writes every figure as JSON (bench/gpu_check.sh collects it).
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "postprocess"))
# The one reader of timeline.h5, shared with trident-post.
from trident_post.timeline import PostError, Timeline, textbook_bubble  # noqa: E402,F401

GPT2 = dict(family="gpt2")
# ~100M parameters: 75.5M in the blocks, 12.6M each in embed_tokens and the untied lm_head.
LLAMA = dict(family="llama", kv_heads=4, ffn_hidden=2048, tie=False)
CONFIGS = {
    "small": dict(GPT2, layers=6, d_model=384, heads=6, vocab=4096, seq_len=256, batch=8),
    "gpt2": dict(GPT2, layers=12, d_model=768, heads=12, vocab=50304, seq_len=256, batch=4),
    "gpt2-1024": dict(GPT2, layers=12, d_model=768, heads=12, vocab=50304, seq_len=1024, batch=8),
    "gpt2-t1024": dict(GPT2, layers=12, d_model=768, heads=12, vocab=50304, seq_len=1024, batch=1),
    "llama": dict(LLAMA, layers=12, d_model=768, heads=12, vocab=16384, seq_len=256, batch=4),
    # Llama 3.2 1B's shape (its tied head included), at issue 36's GPU target T = 4096, B = 4.
    "llama-1b": dict(LLAMA, layers=16, d_model=2048, heads=32, kv_heads=8, ffn_hidden=8192, vocab=128256,
                     seq_len=4096, batch=4, tie=True),
}
DEFAULT_CONFIGS = {"cpu": "small,gpt2,llama", "cuda": "gpt2-1024"}
DEFAULT_TORCH = {"cpu": "fp32-explicit", "cuda": "tf32-explicit,bf16-sdpa,bf16-sdpa-compile"}

FLOP_FORMULA = "FLOPs/step = 6*N_nonembedding*B*T + 6*V*C*B*T + 6*L*B*T^2*C"


class BenchError(Exception):
    """A failure the user must see; main() prints it and exits 1."""


def open_timeline(path):
    try:
        return Timeline(path)
    except PostError as e:
        raise BenchError(str(e))


def timeline_medians(tl, warmup, *columns):
    """{column: median of /steps after step `warmup`}."""
    try:
        return tl.medians_after(warmup, *columns)
    except PostError as e:
        raise BenchError(str(e))


def torch_variant(text):
    """'bf16-sdpa-compile' -> {'matmul': 'bf16', 'attention': 'sdpa', 'compile': True}."""
    parts = text.split("-")
    if len(parts) not in (2, 3) or parts[0] not in ("fp32", "tf32", "bf16") or \
            parts[1] not in ("explicit", "sdpa") or (len(parts) == 3 and parts[2] != "compile"):
        raise ValueError(f"--torch variant {text!r}: expected MATMUL-ATTENTION[-compile], MATMUL one of "
                         "fp32, tf32, bf16, ATTENTION explicit or sdpa, e.g. bf16-sdpa-compile")
    return {"name": text, "matmul": parts[0], "attention": parts[1], "compile": len(parts) == 3}


FP32_EXPLICIT = torch_variant("fp32-explicit")


def nonembedding_parameters(cfg):
    C = cfg["d_model"]
    if cfg["family"] == "llama":
        kv, F = cfg["kv_heads"] * C // cfg["heads"], cfg["ffn_hidden"]
        per_block = (C  # input_layernorm
                     + C * C + 2 * C * kv + C * C  # q, k, v, o_proj
                     + C  # post_attention_layernorm
                     + 3 * C * F)  # gate, up, down_proj
        return cfg["layers"] * per_block + C  # + norm
    per_block = (2 * C  # ln_1
                 + 3 * C * C + 3 * C  # c_attn
                 + C * C + C  # attn c_proj
                 + 2 * C  # ln_2
                 + 4 * C * C + 4 * C  # c_fc
                 + 4 * C * C + C)  # mlp c_proj
    return cfg["layers"] * per_block + 2 * C  # + ln_f


def parameters(cfg):
    """Every parameter: GPT-2 adds wpe to its tied wte; Llama has embed_tokens and, untied, lm_head."""
    C, V = cfg["d_model"], cfg["vocab"]
    if cfg["family"] == "llama":
        embeddings = V * C if cfg["tie"] else 2 * V * C
    else:
        embeddings = V * C + cfg["seq_len"] * C
    return nonembedding_parameters(cfg) + embeddings


def flops_per_step(cfg):
    """The issue's model-FLOP count: weights (forward + backward = 6 per weight and token), the
    head (tied or not; the embedding lookup is not counted), and causal attention counted at half of
    the full T x T score matrix (over the query heads: GQA shares K and V, not the products)."""
    L, C, V, T, B = (cfg[k] for k in ("layers", "d_model", "vocab", "seq_len", "batch"))
    return 6 * nonembedding_parameters(cfg) * B * T + 6 * V * C * B * T + 6 * L * B * T * T * C


def cpu_model():
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def own_blas_kernels(env, trident):
    """`env` for a benchmark's processes, with this CPU's own OpenBLAS kernels rather than the Haswell
    ones the test machines pin: OPENBLAS_CORETYPE removed, then set to the core trident chooses where
    OpenBLAS would fall back below what the CPU's flags allow (src/kernels/blas_core.hpp; trident does
    so itself, and PyTorch's OpenBLAS then runs the same kernels). Returns (env, the core that runs)."""
    env = dict(env)
    env.pop("OPENBLAS_CORETYPE", None)
    version = subprocess.run([str(trident), "--version"], env=env, capture_output=True, text=True).stdout
    core = next((line.split("| core ", 1)[1] for line in version.splitlines() if "| core " in line), "")
    if "trident chose" in core:
        env["OPENBLAS_CORETYPE"] = core.split()[0]
    return env, core or "not OpenBLAS"


def run_checked(what, command, env):
    result = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    if result.returncode != 0:
        tail = "\n".join(result.stdout.splitlines()[-40:])
        raise BenchError(f"{what} failed with exit code {result.returncode}:\n"
                         f"  {shlex.join(command)}\n{tail}")
    return result.stdout


def trident_overrides(cfg, steps, run_dir, precision="auto"):
    """Every key that shapes the work of a step, so that the deck's own values do not matter."""
    settings = {
        "model.family": cfg["family"],
        "model.layers": cfg["layers"], "model.d_model": cfg["d_model"], "model.heads": cfg["heads"],
        "model.vocab": cfg["vocab"], "model.seq_len": cfg["seq_len"],
        "model.tie_embeddings": "true" if cfg["family"] == "gpt2" or cfg["tie"] else "false",
        "parallel.tp": 1, "parallel.pp": 1, "parallel.dp": 1,
        "schedule.microbatches": 1, "schedule.micro_batch_size": cfg["batch"],
        "schedule.virtual_stages": 1,
        # The same optimizer work as the PyTorch reference: decay on 2-D weights, clipping on.
        "train.steps": steps, "train.warmup_steps": 0, "train.weight_decay": 0.1,
        "train.grad_clip": 1.0,
        "data.kind": "synthetic",
        "train.precision": precision,
        "output.dir": run_dir,
    }
    if cfg["family"] == "llama":
        settings.update({"model.kv_heads": cfg["kv_heads"], "model.ffn_hidden": cfg["ffn_hidden"]})
    return [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]


def spread(values, fmt):
    """"median [lowest, highest]" of per-round values, each in `fmt`."""
    values = sorted(values)
    return f"{format(statistics.median(values), fmt)} [{format(values[0], fmt)}, {format(values[-1], fmt)}]"


def read_timeline(path, warmup):
    """Median step time after warm-up and the BLAS facts trident recorded at start-up."""
    tl = open_timeline(path)
    missing = [n for n in ("gemm_peak_gflops", "blas_library", "blas_core", "blas_threads") if n not in tl.attrs]
    if missing:
        raise BenchError(f"{path}: missing root attribute(s) {', '.join(missing)}")
    columns = ("step_time_s", "achieved_gflops") if "achieved_gflops" in tl.steps else ("step_time_s",)
    median = timeline_medians(tl, warmup, *columns)
    return {
        "seconds": median["step_time_s"],
        "reported_gflops": median.get("achieved_gflops"),
        "reported_flops": float(tl.attrs["flops_per_step"]) if "flops_per_step" in tl.attrs else None,
        "gemm_peak_gflops": float(tl.attrs["gemm_peak_gflops"]),
        "blas": f"{tl.attrs['blas_library']}, core {tl.attrs['blas_core']}, {tl.attrs['blas_threads']} threads",
    }


def run_trident(args, cfg, env):
    with tempfile.TemporaryDirectory(prefix="trident-bench-") as run_dir:
        command = shlex.split(args.launcher) + [str(args.trident), "run", str(args.deck)]
        command += trident_overrides(cfg, args.steps, run_dir, args.precision)
        command += [arg for setting in args.set for arg in ("--set", setting)]
        run_checked("trident", command, env)
        return read_timeline(Path(run_dir) / "timeline.h5", args.warmup)


def run_pytorch(args, cfg, env, variant=FP32_EXPLICIT, blas_threads=None):
    command = [sys.executable, str(REPO / "bench" / "pytorch_model.py"),
               "--family", cfg["family"], "--layers", str(cfg["layers"]), "--d-model", str(cfg["d_model"]),
               "--heads", str(cfg["heads"]), "--vocab", str(cfg["vocab"]),
               "--seq-len", str(cfg["seq_len"]), "--batch", str(cfg["batch"]),
               "--steps", str(args.steps), "--warmup", str(args.warmup),
               "--threads", str(args.threads), "--device", args.device]
    if cfg["family"] == "llama":
        command += ["--kv-heads", str(cfg["kv_heads"]), "--ffn-hidden", str(cfg["ffn_hidden"])]
        if cfg["tie"]:
            command += ["--tie-embeddings"]
    if blas_threads:
        command += ["--blas-threads", str(blas_threads)]
    command += ["--matmul", variant["matmul"], "--attention", variant["attention"]]
    if variant["compile"]:
        command += ["--compile"]
    output = run_checked(f"PyTorch reference ({variant['name']})", command, env)
    return json.loads(output.strip().splitlines()[-1])


def child_environment(args):
    """Both sides get the same BLAS core type and thread count. Without --coretype, this CPU's own
    kernels (own_blas_kernels); the core type that ran is read back from each side and printed."""
    if args.coretype:
        env = dict(os.environ, OPENBLAS_CORETYPE=args.coretype)
    else:
        env = own_blas_kernels(os.environ, args.trident)[0] if args.device == "cpu" else dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = str(args.threads)
    env["OMP_NUM_THREADS"] = str(args.threads)
    return env


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cpu (default): the cpu build against PyTorch on the CPU; cuda: the cuda "
                             "build against PyTorch on the same GPU")
    parser.add_argument("--configs", default=None,
                        help=f"comma-separated, from: {', '.join(CONFIGS)} "
                             f"(default: {DEFAULT_CONFIGS['cpu']} on cpu, {DEFAULT_CONFIGS['cuda']} on cuda)")
    parser.add_argument("--torch", default=None,
                        help="comma-separated PyTorch runs, each MATMUL-ATTENTION[-compile], or none (default: "
                             f"{DEFAULT_TORCH['cpu']} on cpu, {DEFAULT_TORCH['cuda']} on cuda)")
    parser.add_argument("--precision", default="auto", choices=("auto", "fp32", "tf32", "bf16"),
                        help="trident's train.precision (default auto: fp32 on cpu, TF32 on cuda)")
    parser.add_argument("--json", type=Path, default=None, help="also write every figure to this JSON file")
    parser.add_argument("--batch", type=int, default=None,
                        help="sequences per step for every config (default: each config's own)")
    parser.add_argument("--steps", type=int, default=10, help="training steps per run (default 10)")
    parser.add_argument("--warmup", type=int, default=2,
                        help="leading steps left out of the median (default 2)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                        help="threads for both sides (default: the CPUs this process may use)")
    parser.add_argument("--coretype", default=None,
                        help="OPENBLAS_CORETYPE for both sides, e.g. Haswell or SkylakeX "
                             "(default: unset, OpenBLAS detects the CPU; the core type is reported)")
    parser.add_argument("--trident", type=Path, default=None,
                        help="the executable (default: build/cpu/src/trident, or build/cuda/... on cuda)")
    parser.add_argument("--deck", type=Path, default=REPO / "input_decks" / "small.toml",
                        help="base deck; every key that matters is overridden with --set")
    parser.add_argument("--launcher", default="",
                        help='command put before trident, e.g. "mpirun -n 1" (default: none)')
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a further deck setting for trident's runs, after the benchmark's own "
                             "(repeatable), e.g. train.cuda_graph=true")
    args = parser.parse_args()
    args.configs = (args.configs or DEFAULT_CONFIGS[args.device]).split(",")
    try:
        requested = args.torch or DEFAULT_TORCH[args.device]
        args.torch = [] if requested == "none" else [torch_variant(v) for v in requested.split(",")]
    except ValueError as error:
        parser.error(str(error))
    args.trident = args.trident or REPO / "build" / args.device / "src" / "trident"
    unknown = [c for c in args.configs if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown config {', '.join(unknown)}; valid: {', '.join(CONFIGS)}")
    if args.steps <= args.warmup:
        parser.error(f"--steps {args.steps} must exceed --warmup {args.warmup}")
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    if not args.trident.is_file():
        parser.error(f"no trident executable at {args.trident}; build it (cmake --preset "
                     f"{args.device} && cmake --build --preset {args.device}) or pass --trident PATH")
    if not args.deck.is_file():
        parser.error(f"no deck at {args.deck}; pass --deck PATH (any valid deck: the benchmark "
                     "overrides every key that shapes a step)")
    return args


def bench_config(args, name, env):
    """One config: trident, then each PyTorch variant; one table row, one note line, and the
    figures for --json."""
    cfg = dict(CONFIGS[name], batch=args.batch or CONFIGS[name]["batch"])
    trident = run_trident(args, cfg, env)
    references = [run_pytorch(args, cfg, env, variant) for variant in args.torch]
    flops = flops_per_step(cfg)
    gflops = flops / trident["seconds"] / 1e9
    tokens_per_s = cfg["batch"] * cfg["seq_len"] / trident["seconds"]
    # The MFU reference: trident's own sgemm peak on the CPU, the bf16 peak PyTorch measured on the GPU.
    peak_gflops = (1e3 * max(r["bf16_peak_tflops"] for r in references) if args.device == "cuda" and references
                   else trident["gemm_peak_gflops"])
    row = [name, f"{1e3 * trident['seconds']:.1f}", f"{tokens_per_s:.0f}", f"{gflops:.1f}",
           f"{100 * gflops / peak_gflops:.1f}%"]
    for reference in references:
        row += [f"{reference['ms_per_step']:.1f}", f"{reference['ms_per_step'] / (1e3 * trident['seconds']):.2f}"]
    shape = f"KV={cfg['kv_heads']} F={cfg['ffn_hidden']} " if cfg["family"] == "llama" else ""
    note = (f"{name} ({cfg['family']}): L={cfg['layers']} C={cfg['d_model']} heads={cfg['heads']} {shape}"
            f"V={cfg['vocab']} T={cfg['seq_len']} B={cfg['batch']}; N={parameters(cfg)}, "
            f"N_nonembedding={nonembedding_parameters(cfg)}; "
            f"FLOPs/step={flops / 1e9:.2f} G; trident's GEMM peak ({args.precision}) "
            f"{trident['gemm_peak_gflops']:.1f} GFLOP/s")
    if args.device == "cuda":
        note += f"; bf16 GEMM peak (PyTorch, n=8192) {peak_gflops:.1f} GFLOP/s"
    if any(r["parameters"] != parameters(cfg) for r in references):
        note += f"; PyTorch's model has {references[0]['parameters']} parameters (DIFFERS)"
    if trident["reported_flops"]:
        note += f"; trident's own FLOPs/step {trident['reported_flops'] / 1e9:.2f} G"
        if abs(trident["reported_flops"] / flops - 1) > 0.01:
            note += " (DIFFERS by more than 1%)"
    if trident["reported_gflops"]:
        note += f", its GFLOP/s {trident['reported_gflops']:.1f}"
    torch_sides = [describe_torch(args, reference) for reference in references]
    figures = {"config": name, "shape": cfg, "flops_per_step": flops, "trident_ms": 1e3 * trident["seconds"],
               "trident_tokens_per_s": tokens_per_s, "trident_precision": args.precision,
               "mfu": gflops / peak_gflops, "peak_gflops": peak_gflops, "trident_blas": trident["blas"],
               "torch": [dict(reference, variant=variant["name"])
                         for variant, reference in zip(args.torch, references)]}
    return row, note, trident["blas"], torch_sides, figures


def describe_torch(args, reference):
    if args.device == "cuda":
        return (f"torch {reference['torch_version']} on {reference['device']}, {reference['matmul']} matmul, "
                f"{reference['attention']} attention, {'torch.compile' if reference.get('compiled') else 'eager'}")
    blas = reference["openblas"]
    return (f"torch {reference['torch_version']}, {reference['threads']} threads, "
            + (f"OpenBLAS core {blas['core']}, {blas['threads']} BLAS threads" if blas else "BLAS not OpenBLAS")
            + f" ({reference['torch_build']})")


def main():
    args = parse_args()
    env = child_environment(args)
    results = []
    try:
        for name in args.configs:
            print(f"running {name} ...", file=sys.stderr, flush=True)
            results.append(bench_config(args, name, env))
    except BenchError as error:
        sys.exit(f"single_rank.py: {error}")

    rows, notes, trident_blas, torch_sides, figures = zip(*results)
    print(f"OPENBLAS_CORETYPE={env.get('OPENBLAS_CORETYPE', 'unset')} | threads {args.threads} | "
          f"CPU {cpu_model()}")
    print(f"trident BLAS: {' / '.join(sorted(set(trident_blas)))}")
    print(f"PyTorch: {' / '.join(sorted({side for sides in torch_sides for side in sides}))}")
    reference = ("sgemm peak measured by trident at start-up" if args.device == "cpu"
                 else "bf16 GEMM peak measured by PyTorch on the same GPU")
    print(f"{FLOP_FORMULA}; MFU = GFLOP/s / {reference}; medians over steps {args.warmup + 1}..{args.steps}; "
          "'speed' = torch ms/step / trident ms/step (above 1: trident faster)")
    header = ["config", "ms/step", "tokens/s", "GFLOP/s", "MFU"]
    for variant in args.torch:
        header += [f"{variant['name']} ms", "speed"]
    table = [header] + list(rows)
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths)))
    for note in notes:
        print(note)
    if args.json:
        args.json.write_text(json.dumps({"device": args.device, "steps": args.steps, "warmup": args.warmup,
                                         "configs": list(figures)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
