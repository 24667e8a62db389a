"""One Llama block of trident against the float64 PyTorch reference (llama_reference.py) on the same
weights and input. trident's block (fp32) runs in tests/model/llama_block_dump.cpp; its output,
input gradient and every weight gradient must agree with the reference to fp32 rounding.
"""
import os
import subprocess

import torch  # python3-torch: scripts/setup --tests installs it

from llama_reference import decoder_layer, layer_shapes, load, read_config, relative_error  # noqa: E402


def test_llama_block_matches_pytorch_float64(tmp_path):
    subprocess.run([os.environ["TRIDENT_LLAMA_BLOCK_DUMP"], str(tmp_path)], check=True, timeout=120)
    cfg = read_config(tmp_path)
    B, T, C = cfg["batch"], cfg["seq_len"], cfg["d_model"]
    shapes = layer_shapes(cfg)
    params = {name: load(tmp_path, f"layers.0.{name}", shape).requires_grad_() for name, shape in shapes.items()}
    x = load(tmp_path, "input", (B, T, C)).requires_grad_()
    output = decoder_layer(x, params, cfg)
    (output * load(tmp_path, "output_grad", (B, T, C))).sum().backward()

    # fp32 against float64: measured 2e-7 (output) and 5e-7 (gradients) relative L2.
    assert relative_error(load(tmp_path, "output", (B, T, C)), output.detach()) < 2e-6
    assert relative_error(load(tmp_path, "input_grad", (B, T, C)), x.grad) < 1e-5
    for name, shape in shapes.items():
        got = load(tmp_path, f"layers.0.{name}.grad", shape)
        assert relative_error(got, params[name].grad) < 1e-5, name
