"""trident's export read by Hugging Face `transformers` (issue 40, item 5): a small GPT-2 and a small
Llama (grouped-query, untied head) train two steps with trident, `trident-post export` writes step
2's folder, `from_pretrained` loads it, and its logits give the cross-entropy trident logged for
step 3 on the same batch (DESIGN.md "Token data": window w is tokens [w·T, w·T + T), step s reads
windows (s − 1)·G ... s·G − 1). Prints one line per model and exits 1 when one differs by more than
1e-4 (relative); 77 when `transformers` (or h5py) is not installed. The GPU check runs it with the
kit's trident; here `--trident build/cpu/src/trident`.
    python3 bench/hf_from_pretrained.py --trident build/cpu/src/trident [--mpirun mpirun]
"""
import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
T, MBS, M = 32, 2, 2
SHAPES = {
    "gpt2": ("tiny.toml", ["model.layers=2", "model.d_model=64", "model.heads=4"]),
    "llama": ("llama-tiny.toml", ["model.layers=2", "model.d_model=64", "model.heads=4", "model.kv_heads=2",
                                  "model.ffn_hidden=96", "model.tie_embeddings=false"]),
}


def train_and_export(name, args, work, corpus):
    deck, shape = SHAPES[name]
    run_dir, folder = work / f"run-{name}", work / f"hf-{name}"
    settings = shape + [f"model.seq_len={T}", f"schedule.micro_batch_size={MBS}", f"schedule.microbatches={M}",
                        "parallel.tp=1", "parallel.pp=1", "parallel.dp=1", "train.steps=3", "checkpoint.every=2",
                        "train.precision=fp32", "data.kind=text", f"data.path={corpus}", f"output.dir={run_dir}"]
    command = [args.mpirun, "-n", "1", args.trident, "run", str(REPO / "input_decks" / deck)]
    subprocess.run(command + sum((["--set", s] for s in settings), []), check=True, capture_output=True)
    subprocess.run([sys.executable, str(REPO / "postprocess" / "trident-post"), "export",
                    str(run_dir / "checkpoints" / "step_00000002.h5"), "-o", str(folder)], check=True,
                   capture_output=True)
    return run_dir, folder


def step3_loss(folder, tokens, torch, transformers):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32).eval()
    windows, G = (len(tokens) - 1) // T, MBS * M
    rows = [(2 * G + j) % windows for j in range(G)]
    inputs = torch.tensor(np.stack([tokens[w * T:w * T + T] for w in rows]).astype(np.int64))
    targets = torch.tensor(np.stack([tokens[w * T + 1:w * T + T + 1] for w in rows]).astype(np.int64))
    with torch.no_grad():
        logits = model(inputs).logits.double()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trident", required=True, help="the trident executable")
    parser.add_argument("--mpirun", default="mpirun")
    args = parser.parse_args()
    try:
        import h5py
        import torch
        import transformers
    except ImportError as missing:
        print(f"hf_from_pretrained: skipped: {missing.name} is not installed")
        return 77
    failed = False
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        tokens = np.random.default_rng(7).integers(0, 256, size=6000).astype(np.uint8)
        (work / "corpus.bin").write_bytes(tokens.tobytes())
        for name in SHAPES:
            run_dir, folder = train_and_export(name, args, work, work / "corpus.bin")
            with h5py.File(run_dir / "timeline.h5", "r") as f:
                logged = float(f["steps"]["loss"][2])
            loss = step3_loss(folder, tokens, torch, transformers)
            ok = abs(loss - logged) <= 1e-4 * logged
            failed |= not ok
            print(f"{name}: transformers {transformers.__version__} from_pretrained loss {loss:.6f}, trident "
                  f"{logged:.6f}, relative difference {abs(loss - logged) / logged:.1e} "
                  f"{'ok' if ok else 'FAILED (> 1e-4)'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
