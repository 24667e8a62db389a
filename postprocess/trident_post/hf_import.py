"""`trident-post import HF_DIR --deck DECK --out FILE.h5`: a Hugging Face model folder (config.json with
model.safetensors, a sharded model.safetensors.index.json set, or pytorch_model.bin) as a trident
step-0 checkpoint for the deck's model: the weights under trident's names (DESIGN.md "Checkpoint"),
AdamW's moments zero, which any grid resumes or starts from (checkpoint.init). config.json must
describe the deck's model: every difference is named with both values, exit 2, and nothing is
written. GPT-2's position table is cut to model.seq_len rows."""
import argparse
import os
import sys
import tomllib
from pathlib import Path

import numpy as np

from .ckpt import checksum_of
from .export import deck_model, hf_config
from .hf_folder import HfFolder, config_mismatches, hf_names, model_tensors
from .timeline import PostError, _h5py

HELP = "a Hugging Face model folder as a trident step-0 checkpoint for a deck (checkpoint.init)"
FORMAT_VERSION = 2  # src/train/checkpoint.cpp kCheckpointFormatVersion
ZERO_CHUNK = 1 << 22  # elements of zeros hashed at a time


def add_parser(subparsers):
    p = subparsers.add_parser("import", help=HELP, description=__doc__.split("\n\n")[0].replace("`", ""),
                              epilog="Examples:\n  trident-post import llama-hf --deck input_decks/finetune-llama.toml "
                                     "--out llama.h5\n  trident-post import gpt2-hf --deck input_decks/tiny.toml "
                                     "--set model.layers=12 --out gpt2.h5\n\nThen train from it with "
                                     "checkpoint.init = \"llama.h5\" (or read the folder directly: "
                                     "checkpoint.init = \"hf:llama-hf\").",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", metavar="HF_DIR", help="the Hugging Face model folder (config.json and weights)")
    p.add_argument("--deck", required=True, metavar="DECK", help="the deck whose [model] the weights are for")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a deck key, as trident's --set (recorded in the checkpoint's deck)")
    p.add_argument("--out", required=True, metavar="FILE.h5", help="the checkpoint to write (replaced if present)")
    p.set_defaults(func=run)
    return p


def deck_text(path, overrides):
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise PostError(f"{path}: cannot read the deck ({e.strerror or e})")
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PostError(f"{path}: not valid TOML ({e})")
    for assignment in overrides:
        if "=" not in assignment:
            raise PostError(f"--set {assignment!r}: expected KEY=VALUE, e.g. --set model.layers=12")
        text += f"# --set {assignment}\n"  # as src/deck/deck.cpp records overrides
    return text


def imported_weights(folder, model, model_type):
    """{trident name: float32 array} for every tensor of the deck's model, each checked for presence
    and shape (PostError naming the folder and tensor)."""
    out = {}
    for name, shape in model_tensors(model):
        key = folder.find(name, model_type)
        if key is None:
            raise PostError(f"{folder.path}: no tensor {' or '.join(hf_names(name, model_type))}, which the deck's "
                            f"model needs (shape {shape})")
        have = folder.shape(key)
        cut = name == "wpe.weight" and len(have) == 2 and have[0] >= shape[0] and have[1] == shape[1]
        if have != shape and not cut:
            raise PostError(f"{folder.path}: tensor {key} has shape {have}, the deck's model needs {shape}")
        values = folder.read(key)
        out[name] = np.ascontiguousarray(values[:shape[0]] if cut else values, dtype=np.float32)
    return out


def zeros_checksum(shape):
    total = int(np.prod(shape, dtype=np.int64))
    acc = 0
    for start in range(0, total, ZERO_CHUNK):
        acc = (acc + checksum_of(np.zeros(min(ZERO_CHUNK, total - start), np.float32), start)) % (1 << 64)
    return acc


def write_checkpoint(out, tensors, deck, model, source):
    """The step-0 checkpoint, written to OUT.tmp and renamed: a failure leaves no partial OUT."""
    h5py = _h5py()
    temporary = Path(str(out) + ".tmp")
    seed = tomllib.loads(deck).get("train", {}).get("seed", 1234)
    try:
        with h5py.File(temporary, "w") as f:
            for name, values in tensors.items():
                path = name.replace(".", "/")
                f.create_dataset(f"model/{path}", data=values).attrs["checksum"] = np.uint64(checksum_of(values))
                zero = np.uint64(zeros_checksum(values.shape))
                for group in ("optimizer/m", "optimizer/v"):  # fill value only: no storage written
                    f.create_dataset(f"{group}/{path}", shape=values.shape, dtype="<f4", fillvalue=0.0)\
                        .attrs["checksum"] = zero
            f.attrs.update({"step": np.int64(0), "data_position": np.int64(0), "data_epoch": np.int64(0),
                            "seed": np.int64(seed), "format_version": np.int64(FORMAT_VERSION),
                            "rng": "counter-based (seed, tensor name, element index): no state to save",
                            "grid": "imported", "model_family": model["family"], "deck": deck,
                            "imported_from": str(source)})
        os.replace(temporary, out)
    except OSError as e:
        temporary.unlink(missing_ok=True)
        raise PostError(f"cannot write {out}: {e.strerror or e}")


def describe_files(files):
    return files[0] if len(files) == 1 else f"{len(files)} shards, {files[0]} ..."


def run(args):
    deck = deck_text(args.deck, args.set)
    model = deck_model(deck)
    expected = hf_config(model)
    folder = HfFolder(args.folder)
    problems = config_mismatches(folder.config, expected, model["seq_len"])
    if problems:
        raise PostError(f"{folder.path / 'config.json'} does not describe the model of {args.deck}:\n  " +
                        "\n  ".join(problems))
    tensors = imported_weights(folder, model, expected["model_type"])
    write_checkpoint(Path(args.out), tensors, deck, model, folder.path)
    unused = sorted(set(folder.where) - {folder.find(name, expected["model_type"]) for name in tensors})
    parameters = sum(v.size for v in tensors.values())
    print(f"{args.out}: step 0, {len(tensors)} tensors ({parameters:,} parameters) from {folder.path} "
          f"({expected['architectures'][0]}, {describe_files(sorted(folder.files))})")
    if unused:
        print(f"  not imported: {len(unused)} tensors of the folder the model has no place for: "
              f"{', '.join(unused[:4])}{', ...' if len(unused) > 4 else ''}", file=sys.stderr)
    return 0
