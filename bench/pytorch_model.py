#!/usr/bin/python3
"""Reference training step in eager PyTorch (CPU or one GPU, fp32 weights) for either model family
trident trains, timed.

--family gpt2 (default) is DESIGN.md's GPT-2: pre-LN blocks, fused qkv c_attn (C -> 3C, bias),
c_proj, MLP C -> 4C -> C with tanh GELU, LayerNorm eps 1e-5, head tied to wte. --family llama is
Hugging Face's LlamaForCausalLM: RMSNorm (eps 1e-5), bias-free q/k/v/o projections with
grouped-query attention (--kv-heads), RoPE in the rotate_half convention (--rope-theta), SwiGLU MLP
(--ffn-hidden), untied lm_head. Both end in mean cross-entropy, no dropout. Attention is the
explicit masked softmax (nanoGPT's fallback): torch 1.13 has no scaled_dot_product_attention. The
optimizer is torch.optim.AdamW (no fused variant in 1.13), with weight decay on 2-D weights only and
global-norm clipping at 1.0, as trident's step does.

On a GPU (--device cuda), --matmul tf32 lets the matrix products use TF32 tensor cores as
trident's GPU build does, --matmul bf16 runs forward and loss under bf16 autocast (fp32 master
weights, as mixed-precision training does), --attention sdpa uses torch's fused
scaled_dot_product_attention instead of the explicit softmax, --compile wraps the model in
torch.compile (PyTorch 2.0 or later: Triton kernels on a GPU), and the JSON also carries the bf16
GEMM peak measured on that GPU first. --tie-embeddings shares the llama family's lm_head with
embed_tokens (Llama 3.2 1B).

Prints one JSON line: ms_per_step (median over the steps after warm-up), tokens_per_s and what the
numbers were measured with (torch version, threads, BLAS).
"""
import argparse
import contextlib
import ctypes
import json
import math
import re
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_attention(q, k, v, causal, fused):
    """q, k, v [B, heads, T, head_dim] -> [B, T, heads * head_dim]."""
    B, H, T, hd = q.shape
    if fused:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(~causal[:, :, :T, :T], float("-inf"))
        y = F.softmax(att, dim=-1) @ v
    return y.transpose(1, 2).contiguous().view(B, T, H * hd)


def causal_mask(seq_len):
    return torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool)).view(1, 1, seq_len, seq_len)


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, heads, seq_len, fused=False):
        super().__init__()
        self.heads = heads
        self.fused = fused
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)
        self.register_buffer("causal", causal_mask(seq_len), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        # (B, T, C) -> (B, heads, T, head_dim)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        return self.c_proj(causal_attention(q, k, v, self.causal, self.fused))


class MLP(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.c_fc = nn.Linear(d_model, 4 * d_model)
        self.c_proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d_model, heads, seq_len, fused_attention):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model, eps=1e-5)
        self.attn = CausalSelfAttention(d_model, heads, seq_len, fused_attention)
        self.ln_2 = nn.LayerNorm(d_model, eps=1e-5)
        self.mlp = MLP(d_model)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, layers, d_model, heads, vocab, seq_len, fused_attention=False):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(seq_len, d_model)
        self.h = nn.ModuleList(Block(d_model, heads, seq_len, fused_attention) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d_model, eps=1e-5)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, mean=0.0, std=0.02)

    def forward(self, tokens, targets):
        T = tokens.size(1)
        x = self.wte(tokens) + self.wpe(torch.arange(T, device=tokens.device))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class RotaryEmbedding(nn.Module):
    """HF's rotate_half RoPE: dimension i pairs with i + head_dim/2, inverse frequency theta^(-2i/hd)."""

    def __init__(self, head_dim, seq_len, theta):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.outer(torch.arange(seq_len, dtype=torch.float64), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, x):
        """x [B, heads, T, hd]."""
        T, half = x.shape[-2], x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * self.cos[:T] + rotated * self.sin[:T]


class LlamaAttention(nn.Module):
    def __init__(self, d_model, heads, kv_heads, seq_len, rope, fused=False):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d_model // heads
        self.fused = fused
        self.rope = rope
        self.q_proj = nn.Linear(d_model, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d_model, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d_model, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, d_model, bias=False)
        self.register_buffer("causal", causal_mask(seq_len), persistent=False)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = self.rope(q), self.rope(k)
        # HF's repeat_kv: query head i reads kv head i // (heads / kv_heads).
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        return self.o_proj(causal_attention(q, k, v, self.causal, self.fused))


class SwiGLU(nn.Module):
    def __init__(self, d_model, ffn_hidden):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, ffn_hidden, bias=False)
        self.up_proj = nn.Linear(d_model, ffn_hidden, bias=False)
        self.down_proj = nn.Linear(ffn_hidden, d_model, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self, args, rope, fused_attention):
        super().__init__()
        self.input_layernorm = RMSNorm(args.d_model)
        self.self_attn = LlamaAttention(args.d_model, args.heads, args.kv_heads, args.seq_len, rope,
                                        fused_attention)
        self.post_attention_layernorm = RMSNorm(args.d_model)
        self.mlp = SwiGLU(args.d_model, args.ffn_hidden)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, args, fused_attention=False):
        super().__init__()
        self.embed_tokens = nn.Embedding(args.vocab, args.d_model)
        rope = RotaryEmbedding(args.d_model // args.heads, args.seq_len, args.rope_theta)
        self.layers = nn.ModuleList(LlamaBlock(args, rope, fused_attention) for _ in range(args.layers))
        self.norm = RMSNorm(args.d_model)
        self.lm_head = nn.Linear(args.d_model, args.vocab, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, mean=0.0, std=0.02)
        if args.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    def forward(self, tokens, targets):
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def build_model(args):
    fused = args.attention == "sdpa"
    if args.family == "llama":
        return Llama(args, fused)
    return GPT(args.layers, args.d_model, args.heads, args.vocab, args.seq_len, fused)


def make_optimizer(model):
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() != 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=3e-4, betas=(0.9, 0.95), eps=1e-8)


def openblas_info(threads):
    """Sets OpenBLAS's own thread count (torch.set_num_threads does not reach it in Debian's
    generic-BLAS build) and reports the core type it dispatches to; None if BLAS is not OpenBLAS."""
    try:
        blas = ctypes.CDLL("libblas.so.3")  # the library libtorch_cpu links, already loaded
        blas.openblas_set_num_threads(threads)
        blas.openblas_get_corename.restype = ctypes.c_char_p
        blas.openblas_get_config.restype = ctypes.c_char_p
    except (OSError, AttributeError):
        return None
    return {
        "core": blas.openblas_get_corename().decode(),
        "config": blas.openblas_get_config().decode(),
        "threads": blas.openblas_get_num_threads(),
    }


def bf16_gemm_peak_tflops(device, n=8192, repeats=10):
    """Best TFLOP/s of an n³ bf16 matrix product on `device` (fp32 accumulation): the GPU's
    reference for MFU, measured in the same run as the training it is compared with."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    best = 0.0
    for i in range(repeats + 1):  # the first product warms up cuBLAS
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        a @ b
        torch.cuda.synchronize(device)
        if i > 0:
            best = max(best, 2 * n ** 3 / (time.perf_counter() - start) / 1e12)
    return best


def torch_build_summary():
    """The BLAS and vector-ISA entries of torch.__config__.show()."""
    return "; ".join(re.findall(r"CPU capability usage: \w+|BLAS_INFO=\w+", torch.__config__.show()))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=("gpt2", "llama"), default="gpt2")
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--d-model", type=int, required=True)
    parser.add_argument("--heads", type=int, required=True)
    parser.add_argument("--vocab", type=int, required=True)
    parser.add_argument("--seq-len", type=int, required=True)
    parser.add_argument("--kv-heads", type=int, default=None, help="llama: key/value heads (default: --heads)")
    parser.add_argument("--ffn-hidden", type=int, default=None,
                        help="llama: SwiGLU hidden size (default: 8*C/3 rounded up to a multiple of 256)")
    parser.add_argument("--rope-theta", type=float, default=500000.0, help="llama: RoPE base (default 500000)")
    parser.add_argument("--batch", type=int, required=True, help="sequences per step")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2, help="leading steps left out of the median")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(),
                        help="torch's intra-op threads (and the BLAS's, unless --blas-threads)")
    parser.add_argument("--blas-threads", type=int, default=None,
                        help="OpenBLAS's threads (default: --threads); e.g. 1 intra-op thread and 2 BLAS "
                             "threads is Debian's torch's fastest setting on 2 cores")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--matmul", choices=("fp32", "tf32", "bf16"), default="fp32",
                        help="GPU matrix products in fp32 (torch's default), on TF32 tensor cores, or "
                             "under bf16 autocast (fp32 master weights)")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (PyTorch >= 2.0)")
    parser.add_argument("--tie-embeddings", action="store_true",
                        help="llama: lm_head shares embed_tokens' weight (GPT-2's head is always tied)")
    parser.add_argument("--attention", choices=("explicit", "sdpa"), default="explicit",
                        help="explicit masked softmax (trident's math) or torch's fused SDPA")
    args = parser.parse_args()
    if args.d_model % args.heads != 0:
        parser.error(f"--d-model {args.d_model} is not divisible by --heads {args.heads}")
    if args.steps <= args.warmup:
        parser.error(f"--steps {args.steps} must exceed --warmup {args.warmup}")
    args.kv_heads = args.kv_heads or args.heads
    args.ffn_hidden = args.ffn_hidden or (8 * args.d_model // 3 + 255) // 256 * 256
    if args.heads % args.kv_heads != 0:
        parser.error(f"--heads {args.heads} is not a multiple of --kv-heads {args.kv_heads}")
    if args.compile and not hasattr(torch, "compile"):
        parser.error(f"--compile needs PyTorch 2.0 or later; this is {torch.__version__}")
    return args


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    blas = openblas_info(args.blas_threads or args.threads)
    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    if on_gpu:
        torch.backends.cuda.matmul.allow_tf32 = args.matmul == "tf32"
    peak = bf16_gemm_peak_tflops(device) if on_gpu else None
    torch.manual_seed(args.seed)
    model = build_model(args).to(device)
    optimizer = make_optimizer(model)
    if args.compile:
        model = torch.compile(model)
    # bf16 autocast: products and most activations in bf16, master weights, optimizer and the
    # gradients' accumulation in fp32 (the loss's softmax stays fp32 under autocast's rules).
    precision = (lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16)) if args.matmul == "bf16" \
        else contextlib.nullcontext

    def finish_device_work():
        if on_gpu:
            torch.cuda.synchronize(device)

    step_times, losses = [], []
    for _ in range(args.steps):
        window = torch.randint(0, args.vocab, (args.batch, args.seq_len + 1), device=device)
        finish_device_work()
        start = time.perf_counter()
        with precision():
            loss = model(window[:, :-1], window[:, 1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        finish_device_work()
        step_times.append(time.perf_counter() - start)
        losses.append(loss.item())

    seconds = statistics.median(step_times[args.warmup:])
    print(json.dumps({
        "ms_per_step": 1e3 * seconds,
        "tokens_per_s": args.batch * args.seq_len / seconds,
        "steps_timed": args.steps - args.warmup,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "family": args.family,
        "parameters": sum(p.numel() for p in model.parameters()),
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
        "openblas": blas,
        "torch_build": torch_build_summary(),
        "device": torch.cuda.get_device_name(device) if on_gpu else "cpu",
        "matmul": args.matmul if on_gpu or args.matmul == "bf16" else "fp32",
        "attention": args.attention,
        "compiled": args.compile,
        "bf16_peak_tflops": peak,
    }))


if __name__ == "__main__":
    main()
