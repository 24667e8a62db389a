"""`trident-post export RUN_OR_CKPT -o DIR`: a trident checkpoint as a Hugging Face model folder that
`from_pretrained(DIR)` loads: config.json with the architecture's fields (GPT2LMHeadModel,
LlamaForCausalLM, or MixtralForCausalLM for a Llama deck with [model.moe], from the deck the
checkpoint records) and pytorch_model.bin, the weights in that architecture's key names written
with torch.save. The checkpoint's checksums are verified first. Needs torch."""
import argparse
import json
import sys
import tomllib
from pathlib import Path

import numpy as np

from .ckpt import import_torch, verify
from .timeline import PostError, _h5py

HELP = "write a checkpoint as a Hugging Face model folder (config.json + pytorch_model.bin)"


def add_parser(subparsers):
    p = subparsers.add_parser("export", help=HELP, description=__doc__.split("\n\n")[0].replace("`", ""),
                              epilog="Examples:\n  trident-post export runs/llama-tiny -o llama-tiny-hf\n"
                                     "  trident-post export runs/tiny/checkpoints/step_00000020.h5 -o gpt2-hf",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", metavar="RUN_OR_CKPT",
                   help="checkpoint file (step_XXXXXXXX.h5), or a checkpoints/ or run directory (its `latest`)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="the folder to write (created if missing)")
    p.set_defaults(func=run)
    return p


def deck_model(deck_text):
    """The deck's [model] table with its `--set model.*` overrides (recorded as comments) applied."""
    model = dict(tomllib.loads(deck_text).get("model", {}))
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
    return model


def hf_config(model):
    """config.json for the deck's model, with DESIGN.md's defaults for the keys it leaves out."""
    C, H = model["d_model"], model["heads"]
    common = {"vocab_size": model["vocab"], "torch_dtype": "float32"}
    if model.get("family", "gpt2") == "gpt2":
        return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": C, "n_head": H,
                "n_layer": model["layers"], "n_positions": model["seq_len"], "n_inner": None,
                "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
                "attn_pdrop": 0.0, "tie_word_embeddings": True, **common}
    default_ffn = ((8 * C + 2) // 3 + 255) // 256 * 256
    ffn = model.get("ffn_hidden", default_ffn)
    llama = {"hidden_size": C, "intermediate_size": ffn, "num_hidden_layers": model["layers"],
             "num_attention_heads": H, "num_key_value_heads": model.get("kv_heads", H),
             "max_position_embeddings": model["seq_len"], "rms_norm_eps": model.get("norm_eps", 1e-5),
             "rope_theta": model.get("rope_theta", 500000.0), "hidden_act": "silu",
             "tie_word_embeddings": model.get("tie_embeddings", False), "attention_bias": False, **common}
    if "moe" in model:
        return mixtral_config(model["moe"], llama)
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **llama, "mlp_bias": False}


def mixtral_config(moe, llama):
    """Hugging Face's Mixtral: a mixture in every layer, its intermediate_size each expert's width."""
    if moe.get("layer_freq", 1) != 1:
        raise PostError(f"model.moe.layer_freq = {moe['layer_freq']}: Hugging Face's MixtralForCausalLM has a "
                        "mixture of experts in every layer, this model dense MLPs in some; no architecture to "
                        "export it as")
    return {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", **llama,
            "intermediate_size": moe.get("expert_ffn_hidden", llama["intermediate_size"]),
            "num_local_experts": moe["experts"], "num_experts_per_tok": moe.get("top_k", 2),
            "router_aux_loss_coef": moe.get("aux_loss_coef", 0.001), "output_router_logits": False,
            "sliding_window": None}


def hf_key(name, config):
    """trident's tensor name (DESIGN.md "Checkpoint") as the architecture's state-dict key."""
    if config["model_type"] == "gpt2":
        return "transformer." + name
    return name if name == "lm_head.weight" else "model." + name  # Llama and Mixtral


def state_dict(path, model_datasets, config):
    torch = import_torch()
    h5py = _h5py()
    state = {}
    with h5py.File(path, "r") as f:
        for dataset in model_datasets:
            name = dataset[len("/model/"):].replace("/", ".")
            state[hf_key(name, config)] = torch.from_numpy(np.array(f[dataset][()], dtype=np.float32))
    if config["model_type"] == "gpt2":
        state["lm_head.weight"] = state["transformer.wte.weight"]  # the tied head
    return state


def run(args):
    torch = import_torch()  # fail early, before reading a large file
    path, attrs, problems, model_datasets = verify(args.checkpoint, quiet=True, out=lambda *a: None)
    if problems:
        for name, problem in problems:
            print(f"trident-post export: error: {path}: dataset {name} {problem}", file=sys.stderr)
        return 1
    if "deck" not in attrs:
        raise PostError(f"{path}: no `deck` attribute, so the model's shape is unknown")
    config = hf_config(deck_model(attrs["deck"]))
    state = state_dict(path, model_datasets, config)
    out = Path(args.output)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        torch.save(state, out / "pytorch_model.bin")
    except OSError as e:
        raise PostError(f"cannot write {out}: {e.strerror or e}")
    print(f"{out}: {config['architectures'][0]}, {len(state)} tensors, step {attrs['step']} of {path}")
    return 0
