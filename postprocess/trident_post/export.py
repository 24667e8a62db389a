"""`trident-post export RUN_OR_CKPT -o DIR`: a trident checkpoint as a Hugging Face model folder that
`from_pretrained(DIR)` loads: config.json with the architecture's fields (GPT2LMHeadModel,
LlamaForCausalLM, or MixtralForCausalLM for a Llama deck with [model.moe], from the deck the
checkpoint records) and the weights in that architecture's key names: safetensors (model.safetensors,
or shards of at most --shard-size with model.safetensors.index.json), float32 or bf16, or with
--format bin one pytorch_model.bin written with torch.save. The checkpoint's checksums are verified
first."""
import argparse
import json
import sys
import tomllib
from pathlib import Path

import numpy as np

from . import safetensors
from .ckpt import import_torch, verify
from .timeline import PostError, _h5py

HELP = "write a checkpoint as a Hugging Face model folder (config.json + safetensors)"
# DESIGN.md's defaults for the [model] keys a deck may leave out (src/family/model_config.hpp).
MODEL_DEFAULTS = {"family": "gpt2", "layers": 2, "d_model": 64, "heads": 4, "seq_len": 64, "vocab": 256,
                  "rope_theta": 500000.0, "norm_eps": 1e-5}
MOE_DEFAULTS = {"top_k": 2, "layer_freq": 1, "aux_loss_coef": 0.001}


def add_parser(subparsers):
    p = subparsers.add_parser("export", help=HELP, description=__doc__.split("\n\n")[0].replace("`", ""),
                              epilog="Examples:\n  trident-post export runs/llama-tiny -o llama-tiny-hf\n"
                                     "  trident-post export runs/tiny/checkpoints/step_00000020.h5 -o gpt2-hf",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", metavar="RUN_OR_CKPT",
                   help="checkpoint file (step_XXXXXXXX.h5), or a checkpoints/ or run directory (its `latest`)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="the folder to write (created if missing)")
    p.add_argument("--format", choices=("safetensors", "bin"), default="safetensors",
                   help="safetensors (default) or pytorch_model.bin (torch.save, float32)")
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="safetensors' dtype (default fp32)")
    p.add_argument("--shard-size", default="5GB", metavar="SIZE",
                   help="largest safetensors file, e.g. 5GB (default), 500MB; larger models are sharded with "
                        "model.safetensors.index.json")
    p.set_defaults(func=run)
    return p


def deck_model(deck_text):
    """The deck's [model] table with its `--set model.*` overrides (recorded as comments) applied and
    DESIGN.md's defaults where it leaves a key out."""
    model = {**MODEL_DEFAULTS, **tomllib.loads(deck_text).get("model", {})}
    for line in deck_text.splitlines():
        if not line.startswith("# --set model."):
            continue
        key, value = line[len("# --set model."):].split("=", 1)
        *tables, key = key.strip().split(".")  # model.moe.experts: the table [model.moe]
        table = model
        for name in tables:
            table = table.setdefault(name, {})
        try:
            table[key] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            table[key] = value  # a bare word, as --set accepts for strings
    return with_derived_defaults(model)


def with_derived_defaults(model):
    """The defaults that follow from other keys: kv_heads = heads, ffn_hidden ⌈8C/3⌉ to a multiple
    of 256, the head tied for GPT-2 only, an expert as wide as the dense MLP."""
    C = model["d_model"]
    model.setdefault("kv_heads", model["heads"])
    model.setdefault("ffn_hidden", ((8 * C + 2) // 3 + 255) // 256 * 256)
    model.setdefault("tie_embeddings", model["family"] == "gpt2")
    if "moe" in model:
        model["moe"] = {**MOE_DEFAULTS, "expert_ffn_hidden": model["ffn_hidden"], **model["moe"]}
    return model


def hf_config(model):
    """config.json for the deck's model, with DESIGN.md's defaults for the keys it leaves out."""
    C, H = model["d_model"], model["heads"]
    common = {"vocab_size": model["vocab"], "torch_dtype": "float32"}
    if model["family"] == "gpt2":
        return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": C, "n_head": H,
                "n_layer": model["layers"], "n_positions": model["seq_len"], "n_inner": None,
                "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
                "attn_pdrop": 0.0, "tie_word_embeddings": True, **common}
    llama = {"hidden_size": C, "intermediate_size": model["ffn_hidden"], "num_hidden_layers": model["layers"],
             "num_attention_heads": H, "num_key_value_heads": model["kv_heads"],
             "max_position_embeddings": model["seq_len"], "rms_norm_eps": model["norm_eps"],
             "rope_theta": model["rope_theta"], "hidden_act": "silu", "rope_scaling": None,
             "tie_word_embeddings": model["tie_embeddings"], "attention_bias": False, **common}
    if "moe" in model:
        return mixtral_config(model["moe"], llama)
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **llama, "mlp_bias": False}


def mixtral_config(moe, llama):
    """Hugging Face's Mixtral: a mixture in every layer, its intermediate_size each expert's width."""
    if moe["layer_freq"] != 1:
        raise PostError(f"model.moe.layer_freq = {moe['layer_freq']}: Hugging Face's MixtralForCausalLM has a "
                        "mixture of experts in every layer, this model dense MLPs in some; no architecture to "
                        "export it as")
    return {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", **llama,
            "intermediate_size": moe["expert_ffn_hidden"],
            "num_local_experts": moe["experts"], "num_experts_per_tok": moe["top_k"],
            "router_aux_loss_coef": moe["aux_loss_coef"], "output_router_logits": False,
            "sliding_window": None}


def hf_key(name, config):
    """trident's tensor name (DESIGN.md "Checkpoint") as the architecture's state-dict key."""
    if config["model_type"] == "gpt2":
        return "transformer." + name
    return name if name == "lm_head.weight" else "model." + name  # Llama and Mixtral


def weights(path, model_datasets, config):
    """{HF key: float32 array} in the checkpoint's order (a tied head is not repeated)."""
    h5py = _h5py()
    with h5py.File(path, "r") as f:
        return {hf_key(d[len("/model/"):].replace("/", "."), config): np.array(f[d][()], dtype=np.float32)
                for d in model_datasets}


def parse_size(text):
    """"5GB", "500MB", "1.5GiB", "1000000" → bytes (decimal units as Hugging Face's max_shard_size)."""
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}
    number = text.upper().rstrip("KMGIB")
    try:
        size = float(number) * units[text.upper()[len(number):]]
    except (ValueError, KeyError):
        raise PostError(f"--shard-size {text!r}: expected a size such as 5GB, 500MB or 2GiB")
    if size < 1:
        raise PostError(f"--shard-size {text!r}: must be at least one byte")
    return int(size)


def write_bin(out, tensors, config):
    torch = import_torch()
    state = {key: torch.from_numpy(values) for key, values in tensors.items()}
    if config["model_type"] == "gpt2":
        state["lm_head.weight"] = state["transformer.wte.weight"]  # the tied head
    torch.save(state, out / "pytorch_model.bin")
    return ["pytorch_model.bin"]


def run(args):
    if args.format == "bin":
        import_torch()  # fail early, before reading a large file
    shard_bytes = parse_size(args.shard_size)
    path, attrs, problems, model_datasets = verify(args.checkpoint, quiet=True, out=lambda *a: None)
    if problems:
        for name, problem in problems:
            print(f"trident-post export: error: {path}: dataset {name} {problem}", file=sys.stderr)
        return 1
    if "deck" not in attrs:
        raise PostError(f"{path}: no `deck` attribute, so the model's shape is unknown")
    config = hf_config(deck_model(attrs["deck"]))
    if args.format == "safetensors" and args.dtype == "bf16":
        config["torch_dtype"] = "bfloat16"
    tensors = weights(path, model_datasets, config)
    out = Path(args.output)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        files = write_bin(out, tensors, config) if args.format == "bin" else \
            safetensors.write_folder(out, tensors, {"fp32": "F32", "bf16": "BF16"}[args.dtype], shard_bytes)
    except OSError as e:
        raise PostError(f"cannot write {out}: {e.strerror or e}")
    print(f"{out}: {config['architectures'][0]}, {len(tensors)} tensors in {', '.join(files)}, "
          f"step {attrs['step']} of {path}")
    return 0
