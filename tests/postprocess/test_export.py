"""`trident-post export`: a Llama run's checkpoint as a Hugging Face folder whose tensors, loaded back
with torch and run through a plain float64 PyTorch LlamaForCausalLM (tests/llama_reference.py), give
the loss trident logged for the next step; and a GPT-2 run's folder in GPT2LMHeadModel naming.

The data is the bytes of a file (data.kind = "text"), so the test can cut step 3's batch itself,
as DESIGN.md "Token data" fixes it: window w is tokens [w·T, w·T + T) with targets one further,
and sequence j of step s is window ((s − 1)·G + j) mod N for a global batch of G sequences.
"""
import json
import struct
import subprocess
import sys

import numpy as np
import torch  # python3-torch: scripts/setup --tests installs it

from conftest import REPO, read_steps

from llama_reference import causal_lm_loss  # noqa: E402
from mixtral_reference import Mixtral  # noqa: E402

POST = REPO / "postprocess" / "trident-post"
LLAMA = REPO / "input_decks" / "llama-tiny.toml"
MOE = REPO / "input_decks" / "moe-tiny.toml"
T, MBS, M = 16, 2, 2
SMALL = ("model.layers=2", "model.d_model=32", "model.heads=4", "model.kv_heads=2", "model.ffn_hidden=48",
         f"model.seq_len={T}", f"schedule.micro_batch_size={MBS}", f"schedule.microbatches={M}", "train.steps=3",
         "checkpoint.every=2", "output.log_every=1")


def read_safetensors(path):
    """{name: tensor} of a safetensors file, parsed here from the published layout (F32 only)."""
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    header.pop("__metadata__", None)
    data = raw[8 + length:]
    assert all(entry["dtype"] == "F32" for entry in header.values())
    return {name: torch.from_numpy(np.frombuffer(data[e["data_offsets"][0]:e["data_offsets"][1]], dtype="<f4")
                                   .reshape(e["shape"]).copy()) for name, e in header.items()}


def export(checkpoint, out, *options):
    """Exports; returns config.json and the state dict (pytorch_model.bin with --format bin, else
    model.safetensors)."""
    result = subprocess.run([sys.executable, str(POST), "export", str(checkpoint), "-o", str(out), *options],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    state = torch.load(out / "pytorch_model.bin") if "bin" in options else read_safetensors(out / "model.safetensors")
    return json.loads((out / "config.json").read_text()), state


def batch(tokens, step, global_batch):
    windows = (len(tokens) - 1) // T
    rows = [((step - 1) * global_batch + j) % windows for j in range(global_batch)]
    inputs = np.stack([tokens[w * T:w * T + T] for w in rows])
    targets = np.stack([tokens[w * T + 1:w * T + T + 1] for w in rows])
    return torch.from_numpy(inputs.astype(np.int64)), torch.from_numpy(targets.astype(np.int64))


def test_llama_export_gives_tridents_loss(trident_run, tmp_path):
    corpus = tmp_path / "corpus.bin"
    tokens = np.random.default_rng(5).integers(0, 256, size=4000, dtype=np.uint8)
    corpus.write_bytes(tokens.tobytes())
    _, run_dir = trident_run(*SMALL, "data.kind=text", f"data.path={corpus}", deck=LLAMA)
    config, state = export(run_dir / "checkpoints" / "step_00000002.h5", tmp_path / "hf")

    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["intermediate_size"]) == (4, 2, 48)
    assert "lm_head.weight" in state and "model.embed_tokens.weight" in state
    assert tuple(state["model.layers.0.self_attn.k_proj.weight"].shape) == (16, 32)  # [kv_heads · hd, C]
    params = {(k[len("model."):] if k.startswith("model.") else k): v.double() for k, v in state.items()}
    cfg = {"layers": 2, "heads": 4, "kv_heads": 2, "norm_eps": config["rms_norm_eps"],
           "rope_theta": config["rope_theta"]}
    inputs, targets = batch(tokens, 3, MBS * M)
    with torch.no_grad():
        loss = causal_lm_loss(inputs, targets, params, cfg).item()
    logged = read_steps(run_dir)["loss"][2]
    assert abs(loss - logged) < 1e-5 * logged, (loss, logged)


def test_mixtral_export_gives_tridents_loss(trident_run, tmp_path):
    """A mixture of experts in every layer exports as MixtralForCausalLM, in Mixtral's names."""
    corpus = tmp_path / "corpus.bin"
    tokens = np.random.default_rng(6).integers(0, 256, size=4000, dtype=np.uint8)
    corpus.write_bytes(tokens.tobytes())
    moe = ("model.moe.experts=4", "model.moe.top_k=2", "model.moe.expert_ffn_hidden=24")
    _, run_dir = trident_run(*SMALL, *moe, "data.kind=text", f"data.path={corpus}", "parallel.tp=1",
                             "parallel.pp=1", "parallel.dp=1", "parallel.ep=1", deck=MOE)
    config, state = export(run_dir / "checkpoints" / "step_00000002.h5", tmp_path / "hf")

    assert config["architectures"] == ["MixtralForCausalLM"] and config["model_type"] == "mixtral"
    assert (config["num_local_experts"], config["num_experts_per_tok"], config["intermediate_size"]) == (4, 2, 24)
    assert tuple(state["model.layers.1.block_sparse_moe.gate.weight"].shape) == (4, 32)
    assert tuple(state["model.layers.1.block_sparse_moe.experts.3.w2.weight"].shape) == (32, 24)
    assert not any(".mlp." in key for key in state)
    params = {(k[len("model."):] if k.startswith("model.") else k): v.double() for k, v in state.items()}
    cfg = {"layers": 2, "heads": 4, "kv_heads": 2, "norm_eps": config["rms_norm_eps"],
           "rope_theta": config["rope_theta"]}
    inputs, targets = batch(tokens, 3, MBS * M)
    with torch.no_grad():
        loss = causal_lm_loss(inputs, targets, params, cfg, mlp=Mixtral({"experts": 4, "top_k": 2})).item()
    logged = read_steps(run_dir)["loss"][2]
    assert abs(loss - logged) < 1e-5 * logged, (loss, logged)


def test_mixture_with_dense_layers_is_not_exported(trident_run, tmp_path):
    _, run_dir = trident_run("train.steps=1", "model.moe.layer_freq=2", "parallel.tp=1", "parallel.pp=1",
                             "parallel.dp=1", "parallel.ep=1", deck=MOE)
    result = subprocess.run([sys.executable, str(POST), "export", str(run_dir), "-o", str(tmp_path / "hf")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "layer_freq = 2" in result.stderr and "MixtralForCausalLM" in result.stderr
    assert not (tmp_path / "hf" / "config.json").exists()


def test_gpt2_export_uses_gpt2_names_and_a_tied_head(trident_run, tmp_path):
    _, run_dir = trident_run("train.steps=1", "model.layers=1")
    config, state = export(run_dir, tmp_path / "hf", "--format", "bin")
    assert config["architectures"] == ["GPT2LMHeadModel"] and config["tie_word_embeddings"] is True
    assert torch.equal(state["lm_head.weight"], state["transformer.wte.weight"])
    assert tuple(state["transformer.h.0.attn.c_attn.weight"].shape) == (64, 192)  # Conv1D [C, 3C]
