"""A float64 PyTorch reference of Hugging Face's Llama (LlamaForCausalLM), written out with plain
torch operations (the transformers package is not in Debian): RMSNorm, q/k/v/o projections in
nn.Linear layout, RoPE with rotate_half, grouped-query attention by repeating each kv head for its
query heads, causal softmax, SwiGLU MLP, residual connections, final norm, lm_head (or the
embedding, tied) and mean cross-entropy. Used by the block and model reference tests.

Packed documents as Hugging Face takes them: a [B, T, T] attention mask (True where a query may
not look) and [B, T] position ids, both made from the tokens by packed_documents().
"""
import numpy as np
import torch


def read_config(directory):
    values = dict(line.split() for line in (directory / "config.txt").read_text().splitlines())
    return {k: (float(v) if k in ("rope_theta", "norm_eps", "loss") else int(v)) for k, v in values.items()}


def load(directory, name, shape, dtype="<f4"):
    return torch.from_numpy(np.fromfile(directory / f"{name}.f32", dtype=dtype).astype(np.float64)).reshape(shape)


def relative_error(got, want):
    return float((got - want).norm() / want.norm())


def layer_shapes(cfg):
    C, F = cfg["d_model"], cfg["ffn_hidden"]
    hd = C // cfg["heads"]
    q, kv = cfg["heads"] * hd, cfg["kv_heads"] * hd
    return {"input_layernorm.weight": (C,), "self_attn.q_proj.weight": (q, C), "self_attn.k_proj.weight": (kv, C),
            "self_attn.v_proj.weight": (kv, C), "self_attn.o_proj.weight": (C, q),
            "post_attention_layernorm.weight": (C,), "mlp.gate_proj.weight": (F, C), "mlp.up_proj.weight": (F, C),
            "mlp.down_proj.weight": (C, F)}


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def causal_mask(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)


def packed_documents(tokens, eod):
    """The block-diagonal causal mask [B, T, T] (True: masked) and position ids [B, T] of sequences
    whose documents each end with the token `eod` (which belongs to the document it ends)."""
    B, T = tokens.shape
    ends = (tokens == eod).to(torch.int64)
    document = torch.cumsum(ends, dim=1) - ends  # the eod token stays in its document
    same = document[:, :, None] == document[:, None, :]
    mask = causal_mask(T)[None] | ~same
    first = torch.stack([torch.tensor([int((document[b] == document[b, t]).nonzero()[0]) for t in range(T)])
                         for b in range(B)])
    return mask, torch.arange(T)[None, :] - first


def rope(x, theta, positions=None):
    """x [B, heads, T, hd]: HF's apply_rotary_pos_emb with inv_freq = theta^(-2i/hd), at positions
    [B, T] (default 0..T-1)."""
    hd, T = x.shape[-1], x.shape[-2]
    inv_freq = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    if positions is None:
        positions = torch.arange(T)[None, :]
    angles = positions.to(torch.float64)[..., None] * inv_freq  # [B, T, hd/2]
    emb = torch.cat((angles, angles), dim=-1)[:, None]
    return x * emb.cos() + rotate_half(x) * emb.sin()


def swiglu_mlp(h, p):
    gate, up = h @ p["mlp.gate_proj.weight"].T, h @ p["mlp.up_proj.weight"].T
    return (torch.nn.functional.silu(gate) * up) @ p["mlp.down_proj.weight"].T


def decoder_layer(x, p, cfg, mask=None, positions=None, mlp=swiglu_mlp):
    """mlp(h, p): the layer's MLP on the post-attention norm's output (a mixture's in its tests)."""
    B, T, C = x.shape
    H, KV = cfg["heads"], cfg["kv_heads"]
    hd = C // H
    h = rms_norm(x, p["input_layernorm.weight"], cfg["norm_eps"])
    q = (h @ p["self_attn.q_proj.weight"].T).view(B, T, H, hd).transpose(1, 2)
    k = (h @ p["self_attn.k_proj.weight"].T).view(B, T, KV, hd).transpose(1, 2)
    v = (h @ p["self_attn.v_proj.weight"].T).view(B, T, KV, hd).transpose(1, 2)
    q, k = rope(q, cfg["rope_theta"], positions), rope(k, cfg["rope_theta"], positions)
    k = k.repeat_interleave(H // KV, dim=1)  # HF's repeat_kv: query head i reads kv head i // (H / KV)
    v = v.repeat_interleave(H // KV, dim=1)
    scores = q @ k.transpose(-1, -2) / hd ** 0.5
    mask = causal_mask(T)[None] if mask is None else mask
    attention = torch.softmax(scores.masked_fill(mask[:, None], float("-inf")), dim=-1) @ v
    x = x + attention.transpose(1, 2).reshape(B, T, C) @ p["self_attn.o_proj.weight"].T
    h = rms_norm(x, p["post_attention_layernorm.weight"], cfg["norm_eps"])
    return x + mlp(h, p)




def causal_lm_loss(tokens, targets, p, cfg, eod=-1, mlp=swiglu_mlp):
    """Mean cross-entropy of LlamaForCausalLM; p holds every parameter by trident's name. With an
    end-of-document token, documents packed in a sequence are masked apart and their positions
    restart. mlp: every layer's MLP (a Mixtral's mixture: MixtralForCausalLM)."""
    mask, positions = packed_documents(tokens, eod) if eod >= 0 else (None, None)
    x = p["embed_tokens.weight"][tokens]
    for i in range(cfg["layers"]):
        prefix = f"layers.{i}."
        x = decoder_layer(x, {k[len(prefix):]: v for k, v in p.items() if k.startswith(prefix)}, cfg, mask, positions,
                          mlp)
    x = rms_norm(x, p["norm.weight"], cfg["norm_eps"])
    head = p.get("lm_head.weight", p["embed_tokens.weight"])
    logits = x @ head.T
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
