"""A whole Llama model of trident (one rank, its own initialisation) against the float64 PyTorch
reference of LlamaForCausalLM (llama_reference.py) on the same weights and tokens: the loss and
the gradient of every parameter, with an untied head and with a tied one.
"""
import os
import subprocess

import numpy as np
import pytest
import torch  # python3-torch: scripts/setup --tests installs it

from llama_reference import causal_lm_loss, layer_shapes, load, read_config, relative_error  # noqa: E402


def parameter_shapes(cfg, tied):
    C, V = cfg["d_model"], cfg["vocab"]
    shapes = {"embed_tokens.weight": (V, C), "norm.weight": (C,)}
    for i in range(cfg["layers"]):
        shapes.update({f"layers.{i}.{name}": shape for name, shape in layer_shapes(cfg).items()})
    if not tied:
        shapes["lm_head.weight"] = (V, C)
    return shapes


@pytest.mark.parametrize("head", ["untied", "tied"])
def test_llama_model_matches_pytorch_float64(tmp_path, head):
    subprocess.run([os.environ["TRIDENT_LLAMA_MODEL_DUMP"], str(tmp_path), head], check=True, timeout=120)
    cfg = read_config(tmp_path)
    B, T = cfg["batch"], cfg["seq_len"]
    tokens = torch.from_numpy(np.fromfile(tmp_path / "tokens.i32", dtype="<i4").astype(np.int64)).reshape(B, T)
    targets = torch.from_numpy(np.fromfile(tmp_path / "targets.i32", dtype="<i4").astype(np.int64)).reshape(B, T)
    shapes = parameter_shapes(cfg, head == "tied")
    params = {name: load(tmp_path, name, shape).requires_grad_() for name, shape in shapes.items()}
    loss = causal_lm_loss(tokens, targets, params, cfg)
    loss.backward()

    assert abs(cfg["loss"] - loss.item()) < 1e-6 * loss.item()
    for name, shape in shapes.items():
        assert relative_error(load(tmp_path, f"{name}.grad", shape), params[name].grad) < 1e-5, name
