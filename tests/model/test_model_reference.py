"""A whole model of trident (one rank, its own initialisation) against the float64 PyTorch
references of GPT2LMHeadModel (gpt2_reference.py) and LlamaForCausalLM (llama_reference.py) on the
same weights and tokens: the loss and the gradient of every parameter; Llama with an untied head and
with a tied one; both with packed documents (data.document_mask: the reference is given Hugging
Face's block-diagonal mask and position ids, made from the tokens on its own).
"""
import os
import subprocess

import numpy as np
import pytest
import torch  # python3-torch: scripts/setup --tests installs it

import gpt2_reference
import llama_reference
from llama_reference import layer_shapes, load, read_config, relative_error  # noqa: E402


def gpt2_shapes(cfg):
    C, F, V = cfg["d_model"], cfg["ffn_hidden"], cfg["vocab"]
    shapes = {"wte.weight": (V, C), "wpe.weight": (cfg["seq_len"], C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
    layer = {"ln_1.weight": (C,), "ln_1.bias": (C,), "attn.c_attn.weight": (C, 3 * C), "attn.c_attn.bias": (3 * C,),
             "attn.c_proj.weight": (C, C), "attn.c_proj.bias": (C,), "ln_2.weight": (C,), "ln_2.bias": (C,),
             "mlp.c_fc.weight": (C, F), "mlp.c_fc.bias": (F,), "mlp.c_proj.weight": (F, C), "mlp.c_proj.bias": (C,)}
    for i in range(cfg["layers"]):
        shapes.update({f"h.{i}.{name}": shape for name, shape in layer.items()})
    return shapes


def llama_shapes(cfg, tied):
    C, V = cfg["d_model"], cfg["vocab"]
    shapes = {"embed_tokens.weight": (V, C), "norm.weight": (C,)}
    for i in range(cfg["layers"]):
        shapes.update({f"layers.{i}.{name}": shape for name, shape in layer_shapes(cfg).items()})
    if not tied:
        shapes["lm_head.weight"] = (V, C)
    return shapes


CASES = [("gpt2", "tied", ""), ("gpt2", "tied", "documents"), ("llama", "untied", ""), ("llama", "tied", ""),
         ("llama", "untied", "documents")]


@pytest.mark.parametrize("family,head,documents", CASES)
def test_model_matches_pytorch_float64(tmp_path, family, head, documents):
    subprocess.run([os.environ["TRIDENT_MODEL_DUMP"], str(tmp_path), family, head] + ([documents] if documents else []),
                   check=True, timeout=120)
    cfg = read_config(tmp_path)
    B, T = cfg["batch"], cfg["seq_len"]
    tokens = torch.from_numpy(np.fromfile(tmp_path / "tokens.i32", dtype="<i4").astype(np.int64)).reshape(B, T)
    targets = torch.from_numpy(np.fromfile(tmp_path / "targets.i32", dtype="<i4").astype(np.int64)).reshape(B, T)
    if documents:
        assert cfg["eod"] >= 0 and int((tokens == cfg["eod"]).sum()) == 3  # three documents end inside the batch
    shapes = gpt2_shapes(cfg) if family == "gpt2" else llama_shapes(cfg, head == "tied")
    params = {name: load(tmp_path, name, shape).requires_grad_() for name, shape in shapes.items()}
    reference = gpt2_reference if family == "gpt2" else llama_reference
    loss = reference.causal_lm_loss(tokens, targets, params, cfg, cfg["eod"])
    loss.backward()

    assert abs(cfg["loss"] - loss.item()) < 1e-6 * loss.item()
    for name, shape in shapes.items():
        assert relative_error(load(tmp_path, f"{name}.grad", shape), params[name].grad) < 1e-5, name
