"""A float64 PyTorch reference of Hugging Face's MixtralSparseMoeBlock, written from its conventions
with plain torch operations (the transformers package is not in Debian): the router (the gate, an
nn.Linear without bias) scores every expert, softmax over all of them, the top k per token, their
probabilities renormalised over the k; each expert w2(silu(w1 x) · w3 x); the outputs summed with
those weights. The load-balancing loss is HF's load_balancing_loss_func for one layer (no padding
mask): E · Σ over the k slots and experts of (share of tokens whose slot chose the expert) · (mean
router probability of the expert). Plugs into llama_reference.decoder_layer as its `mlp`.
"""
import torch


class Mixtral:
    """HF's MixtralSparseMoeBlock.forward in float64, keeping what the test compares."""

    def __init__(self, cfg):
        self.experts, self.top_k = cfg["experts"], cfg["top_k"]

    def __call__(self, h, p):
        B, T, C = h.shape
        x = h.reshape(-1, C)
        self.probs = torch.softmax(x @ p["block_sparse_moe.gate.weight"].T, dim=-1)
        weights, self.chosen = torch.topk(self.probs, self.top_k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        for e in range(self.experts):
            w = {n: p[f"block_sparse_moe.experts.{e}.{n}.weight"] for n in ("w1", "w2", "w3")}
            token, slot = torch.where(self.chosen == e)
            y = (torch.nn.functional.silu(x[token] @ w["w1"].T) * (x[token] @ w["w3"].T)) @ w["w2"].T
            out = out.index_add(0, token, weights[token, slot, None] * y)
        return out.reshape(B, T, C)

    def load_balancing_loss(self):
        expert_mask = torch.nn.functional.one_hot(self.chosen, self.experts).to(torch.float64)  # [N, k, E]
        tokens_per_expert = expert_mask.mean(dim=0)
        router_prob_per_expert = self.probs.mean(dim=0)
        return (tokens_per_expert * router_prob_per_expert[None]).sum() * self.experts
