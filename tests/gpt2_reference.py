"""A float64 PyTorch reference of Hugging Face's GPT-2 (GPT2LMHeadModel), written out with plain
torch operations: token and learned position embeddings, pre-LayerNorm blocks (eps 1e-5) with
Conv1D weights [in, out], causal multi-head attention, the tanh GELU ("gelu_new"), final LayerNorm,
the head tied to wte and mean cross-entropy. Packed documents as for Llama (llama_reference.py):
the block-diagonal mask and position ids restarted at each document.
"""
import math

import torch

from llama_reference import causal_mask, packed_documents


def layer_norm(x, weight, bias):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, eps=1e-5)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def block(x, p, heads, mask):
    B, T, C = x.shape
    hd = C // heads
    qkv = layer_norm(x, p["ln_1.weight"], p["ln_1.bias"]) @ p["attn.c_attn.weight"] + p["attn.c_attn.bias"]
    q, k, v = (part.view(B, T, heads, hd).transpose(1, 2) for part in qkv.split(C, dim=-1))
    scores = (q @ k.transpose(-1, -2) / math.sqrt(hd)).masked_fill(mask[:, None], float("-inf"))
    attention = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
    x = x + attention @ p["attn.c_proj.weight"] + p["attn.c_proj.bias"]
    h = gelu_tanh(layer_norm(x, p["ln_2.weight"], p["ln_2.bias"]) @ p["mlp.c_fc.weight"] + p["mlp.c_fc.bias"])
    return x + h @ p["mlp.c_proj.weight"] + p["mlp.c_proj.bias"]


def causal_lm_loss(tokens, targets, p, cfg, eod=-1):
    """Mean cross-entropy of GPT2LMHeadModel; p holds every parameter by trident's name."""
    T = tokens.shape[1]
    mask, positions = packed_documents(tokens, eod) if eod >= 0 else (causal_mask(T)[None], torch.arange(T)[None])
    x = p["wte.weight"][tokens] + p["wpe.weight"][positions]
    for i in range(cfg["layers"]):
        prefix = f"h.{i}."
        x = block(x, {k[len(prefix):]: v for k, v in p.items() if k.startswith(prefix)}, cfg["heads"], mask)
    logits = layer_norm(x, p["ln_f.weight"], p["ln_f.bias"]) @ p["wte.weight"].T
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
