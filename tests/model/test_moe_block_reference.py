"""One Llama block whose MLP is a mixture of experts, trident's against a float64 PyTorch model of
Hugging Face's MixtralSparseMoeBlock (tests/mixtral_reference.py) with its load-balancing loss.
trident (fp32, tests/model/llama_block_dump.cpp mixture) must agree on the output, the router's
probabilities, the loss and every gradient of Σ output · output_grad + loss_scale · aux_loss_coef ·
tokens · aux.
"""
import os
import subprocess

import torch  # python3-torch: scripts/setup --tests installs it

from llama_reference import decoder_layer, layer_shapes, load, relative_error  # noqa: E402
from mixtral_reference import Mixtral  # noqa: E402


def read_config(directory):
    values = dict(line.split() for line in (directory / "config.txt").read_text().splitlines())
    return {k: float(v) if any(c in v for c in ".e") else int(v) for k, v in values.items()}


def mixture_shapes(cfg):
    shapes = {k: v for k, v in layer_shapes(cfg).items() if not k.startswith("mlp.")}
    C, F = cfg["d_model"], cfg["expert_ffn_hidden"]
    shapes["block_sparse_moe.gate.weight"] = (cfg["experts"], C)
    for e in range(cfg["experts"]):
        expert = f"block_sparse_moe.experts.{e}."
        shapes |= {expert + "w1.weight": (F, C), expert + "w3.weight": (F, C), expert + "w2.weight": (C, F)}
    return shapes


def test_mixture_block_matches_pytorch_float64(tmp_path):
    subprocess.run([os.environ["TRIDENT_LLAMA_BLOCK_DUMP"], str(tmp_path), "mixture"], check=True, timeout=120)
    cfg = read_config(tmp_path)
    B, T, C = cfg["batch"], cfg["seq_len"], cfg["d_model"]
    shapes = mixture_shapes(cfg)
    params = {name: load(tmp_path, f"layers.0.{name}", shape).requires_grad_() for name, shape in shapes.items()}
    x = load(tmp_path, "input", (B, T, C)).requires_grad_()
    mixture = Mixtral(cfg)
    output = decoder_layer(x, params, cfg, mlp=mixture)
    aux = mixture.load_balancing_loss()
    # The router's top 2 of 4 are distinct everywhere (random weights), so no tie decides a choice.
    assert (mixture.probs.topk(3, dim=-1).values.diff(dim=-1).abs() > 1e-6).all()
    objective = (output * load(tmp_path, "output_grad", (B, T, C))).sum()
    objective = objective + cfg["loss_scale"] * cfg["aux_loss_coef"] * B * T * aux
    objective.backward()

    assert relative_error(load(tmp_path, "router_probs", (B * T, cfg["experts"])), mixture.probs.detach()) < 2e-6
    assert abs(cfg["aux_sum"] - cfg["aux_loss_coef"] * B * T * float(aux)) < 1e-5 * cfg["aux_sum"]
    assert relative_error(load(tmp_path, "output", (B, T, C)), output.detach()) < 2e-6
    assert relative_error(load(tmp_path, "input_grad", (B, T, C)), x.grad) < 1e-5
    for name, shape in shapes.items():
        got = load(tmp_path, f"layers.0.{name}.grad", shape)
        assert relative_error(got, params[name].grad) < 1e-5, name
    # Every expert took tokens, so each of their gradients was compared above.
    assert all(params[f"block_sparse_moe.experts.{e}.w2.weight"].grad.abs().sum() > 0 for e in range(cfg["experts"]))
