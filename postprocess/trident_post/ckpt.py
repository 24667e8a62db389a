"""`trident-post ckpt FILE`: what a trident checkpoint holds (DESIGN.md "Checkpoint"): the step,
the grid that wrote it, the format version and every tensor with its shape, each checksum
recomputed from the data exactly as the writer does (src/io/tensor_slice.{hpp,cpp}). Exits 1
naming the dataset when a checksum does not match. `ckpt --to-torch FILE OUT.pt` writes the model
as a PyTorch state dict in Hugging Face GPT-2 naming (transformer.*, lm_head.weight tied to wte),
after verifying it; it needs torch."""
import argparse
import sys
from pathlib import Path

import numpy as np

from .timeline import PostError, _h5py, attribute_value

HELP = "list a checkpoint's tensors, verify every checksum; --to-torch writes a GPT-2 state dict"

CHECKSUM_ATTRIBUTE = "checksum"
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)
CHUNK_ELEMENTS = 1 << 22  # elements hashed at a time (bounds the temporaries to ~100 MB)


def add_parser(subparsers):
    p = subparsers.add_parser("ckpt", help=HELP, description=__doc__.split("\n\n")[0].replace("`", ""),
                              epilog="Examples:\n  trident-post ckpt runs/tiny/checkpoints/step_00000020.h5\n"
                                     "  trident-post ckpt runs/tiny                 (its checkpoints/latest)\n"
                                     "  trident-post ckpt --to-torch runs/tiny/checkpoints/step_00000020.h5 gpt2.pt",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE",
                   help="checkpoint file (step_XXXXXXXX.h5), or a checkpoints/ or run directory (its `latest`)")
    p.add_argument("out", metavar="OUT.pt", nargs="?", help="with --to-torch: the state dict file to write")
    p.add_argument("--to-torch", action="store_true", help="write the model weights as a PyTorch state dict to OUT.pt")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the summary, not every tensor")
    p.set_defaults(func=run)
    return p


def mix64(index, bits):
    """src/io/tensor_slice.hpp mix64 on uint64 arrays (wrapping arithmetic)."""
    x = index * GOLDEN + bits
    x ^= x >> np.uint64(30)
    x *= MIX1
    x ^= x >> np.uint64(27)
    x *= MIX2
    x ^= x >> np.uint64(31)
    return x


def checksum_of(values, first_index=0):
    """Sum mod 2^64 of mix64(global flat index, float bits) over a float32 array in row-major order,
    whose first element has flat index `first_index`."""
    flat = np.ascontiguousarray(values, dtype="<f4").reshape(-1)
    bits = flat.view("<u4").astype(np.uint64)
    index = np.arange(first_index, first_index + flat.size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return int(mix64(index, bits).sum(dtype=np.uint64))


def dataset_checksum(dataset):
    """The checksum of an h5py float32 dataset, read in slabs along its first axis."""
    shape = dataset.shape
    total = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if total == 0:
        return 0
    if not shape:
        return checksum_of(np.asarray(dataset[()]))
    row = total // shape[0]
    rows_per_chunk = max(1, CHUNK_ELEMENTS // max(row, 1))
    acc = 0
    for start in range(0, shape[0], rows_per_chunk):
        stop = min(shape[0], start + rows_per_chunk)
        acc = (acc + checksum_of(dataset[start:stop], start * row)) % (1 << 64)
    return acc


def resolve_checkpoint(path):
    p = Path(path)
    if not p.exists():
        raise PostError(f"{path}: no such checkpoint file or directory")
    if p.is_dir():
        for d in (p, p / "checkpoints"):
            latest = d / "latest"
            if latest.is_file():
                name = latest.read_text().strip()
                target = d / name
                if not target.is_file():
                    raise PostError(f"{latest} names {name!r}, which does not exist in {d}")
                return target
        raise PostError(f"{path}: a directory without `latest` or checkpoints/latest; give a step_XXXXXXXX.h5 file")
    return p


def tensors(f):
    """[(path, dataset)] of every dataset in the file, in name order."""
    h5py = _h5py()
    found = []
    f.visititems(lambda name, obj: found.append(("/" + name, obj)) if isinstance(obj, h5py.Dataset) else None)
    return found


def verify(path, quiet=False, out=print):
    """Lists and verifies a checkpoint; returns (attributes, [(dataset path, problem)], model datasets)."""
    h5py = _h5py()
    path = resolve_checkpoint(path)
    try:
        is_hdf5 = h5py.is_hdf5(str(path))
    except OSError as e:
        raise PostError(f"{path}: cannot read ({e.strerror or e})")
    if not is_hdf5:
        raise PostError(f"{path}: not an HDF5 file, so not a trident checkpoint")
    problems = []
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise PostError(f"{path}: cannot open as HDF5 ({e})")
    with f:
        attrs = {k: attribute_value(v) for k, v in f.attrs.items()}
        if "model" not in f or "step" not in attrs:
            raise PostError(f"{path}: not a trident checkpoint (it has no /model group or no `step` attribute; "
                            f"a checkpoint is <checkpoint.dir>/step_XXXXXXXX.h5)")
        grid = str(attrs.get("grid", "?"))
        parts = grid.split("x")
        axes = {3: ("tp", "pp", "dp"), 4: ("tp", "cp", "pp", "dp")}.get(len(parts))
        grid_text = " x ".join(f"{axis}{size}" for axis, size in zip(axes, parts)) if axes else grid
        out(f"{path}")
        out(f"  step {attrs['step']}, written by grid {grid_text}, format version {attrs.get('format_version', '?')}"
            f", seed {attrs.get('seed', '?')}, data position {attrs.get('data_position', '?')} sequences")
        all_tensors = tensors(f)
        if not quiet:
            out("")
            out(f"  {'dataset':<44} {'shape':<16} {'dtype':<8} {'checksum':<18}  verified")
        counts = {"model": 0, "optimizer": 0, "other": 0}
        elements = {"model": 0, "optimizer": 0, "other": 0}
        model = []
        for name, ds in all_tensors:
            group = name.split("/")[1] if name.count("/") > 1 else "other"
            group = group if group in counts else "other"
            counts[group] += 1
            elements[group] += int(np.prod(ds.shape, dtype=np.int64))
            if group == "model":
                model.append(name)
            stored = ds.attrs.get(CHECKSUM_ATTRIBUTE)
            if stored is None:
                status, problem = "NO CHECKSUM", "has no checksum attribute"
                stored_text = "-"
            elif ds.dtype != np.float32:
                status, problem = "NOT FLOAT32", f"is {ds.dtype}, the format stores float32"
                stored_text = f"{int(stored):016x}"
            else:
                stored = int(np.uint64(stored))
                try:
                    data = dataset_checksum(ds)
                except OSError as e:
                    data, problem = None, f"cannot be read ({e})"
                    status = "UNREADABLE"
                if data is not None:
                    status = "ok" if data == stored else "MISMATCH"
                    problem = None if data == stored else f"fails its checksum (stored {stored:016x}, data {data:016x})"
                stored_text = f"{stored:016x}"
            if problem:
                problems.append((name, problem))
            if not quiet or problem:
                shape = "[" + ", ".join(str(n) for n in ds.shape) + "]"
                out(f"  {name:<44} {shape:<16} {str(ds.dtype):<8} {stored_text:<18}  {status}")
        out("")
        out(f"  {counts['model']} model tensors ({elements['model']:,} parameters), {counts['optimizer']} optimizer "
            f"tensors ({elements['optimizer']:,} values)" + (f", {counts['other']} other" if counts["other"] else ""))
        if problems:
            out(f"  {len(problems)} of {len(all_tensors)} datasets FAIL verification")
        else:
            out(f"  all {len(all_tensors)} checksums verified")
    return path, attrs, problems, model


def import_torch():
    try:
        import torch
    except ImportError:
        raise PostError("--to-torch needs PyTorch, which this python3 cannot import: install it "
                        "(e.g. pip install torch) or read the HDF5 checkpoint directly with h5py")
    return torch


def to_torch(path, model, out_path):
    torch = import_torch()
    h5py = _h5py()
    state = {}
    with h5py.File(path, "r") as f:
        for name in model:
            key = "transformer." + name[len("/model/"):].replace("/", ".")
            state[key] = torch.from_numpy(np.array(f[name][()], dtype=np.float32))
    if "transformer.wte.weight" in state:
        state["lm_head.weight"] = state["transformer.wte.weight"]  # the tied head (GPT-2)
    try:
        torch.save(state, out_path)
    except OSError as e:
        raise PostError(f"cannot write {out_path}: {e.strerror or e}")
    return state


def run(args):
    if args.to_torch and not args.out:
        raise PostError("--to-torch needs an output file: trident-post ckpt --to-torch FILE OUT.pt")
    if args.out and not args.to_torch:
        raise PostError(f"unexpected second argument {args.out!r} (did you mean --to-torch FILE OUT.pt?)")
    if args.to_torch:
        import_torch()  # fail early, before reading a large file
    path, attrs, problems, model = verify(args.file, quiet=args.quiet or args.to_torch)
    if problems:
        for name, problem in problems:
            print(f"trident-post ckpt: error: {path}: dataset {name} {problem}", file=sys.stderr)
        return 1
    if args.to_torch:
        state = to_torch(path, model, args.out)
        print(f"{args.out}: {len(state)} tensors in GPT-2 naming (transformer.*, lm_head.weight tied to "
              f"transformer.wte.weight), step {attrs['step']}")
    return 0
