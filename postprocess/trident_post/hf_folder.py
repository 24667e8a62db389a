"""A Hugging Face model folder as trident sees it: config.json compared with a deck's model, and the
weights (model.safetensors, a sharded model.safetensors.index.json set, or pytorch_model.bin, also
sharded) read tensor by tensor as float32 under trident's names (DESIGN.md "Checkpoint")."""
import json
from pathlib import Path

from .safetensors import SafetensorsFile
from .timeline import PostError

# (config.json key, deck key, Hugging Face's default when config.json leaves it out; a callable
# takes the config). Each must equal the value the deck's model gives (export.hf_config).
GPT2_FIELDS = [("n_layer", "model.layers", None), ("n_embd", "model.d_model", None),
               ("n_head", "model.heads", None), ("vocab_size", "model.vocab", None),
               ("n_inner", "4 × model.d_model (GPT-2's MLP)", lambda c: None),
               ("activation_function", "GPT-2's tanh GELU", "gelu_new"),
               ("layer_norm_epsilon", "GPT-2's LayerNorm ε", 1e-5),
               ("tie_word_embeddings", "model.tie_embeddings", True)]
LLAMA_FIELDS = [("num_hidden_layers", "model.layers", None), ("hidden_size", "model.d_model", None),
                ("num_attention_heads", "model.heads", None),
                ("num_key_value_heads", "model.kv_heads", lambda c: c.get("num_attention_heads")),
                ("vocab_size", "model.vocab", None), ("tie_word_embeddings", "model.tie_embeddings", False),
                ("hidden_act", "SwiGLU's SiLU", "silu"), ("attention_bias", "no attention bias", False),
                ("rope_scaling", "plain RoPE (trident has no RoPE scaling)", None)]
DENSE_FIELDS = [("intermediate_size", "model.ffn_hidden", None), ("mlp_bias", "no MLP bias", False)]
MIXTURE_FIELDS = [("intermediate_size", "model.moe.expert_ffn_hidden", None),
                  ("num_local_experts", "model.moe.experts", None), ("num_experts_per_tok", "model.moe.top_k", 2)]


def fields_of(model_type):
    if model_type == "gpt2":
        return GPT2_FIELDS
    mixtral = model_type == "mixtral"  # LlamaConfig's and MixtralConfig's defaults differ
    return LLAMA_FIELDS + [("rope_theta", "model.rope_theta", 1e6 if mixtral else 10000.0),
                           ("rms_norm_eps", "model.norm_eps", 1e-5 if mixtral else 1e-6)] + \
        (MIXTURE_FIELDS if mixtral else DENSE_FIELDS)


def same(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        return abs(a - b) <= 1e-6 * max(abs(a), abs(b))
    return a == b


def config_mismatches(config, expected, seq_len):
    """Lines naming each field where config.json and the deck's model (as `expected`, the config
    export would write) disagree, with both values."""
    if config.get("model_type") != expected["model_type"]:
        return [f"model_type: config.json {config.get('model_type')!r}, the deck's model is "
                f"{expected['model_type']!r} (model.family, [model.moe])"]
    lines = []
    for key, deck_key, default in fields_of(expected["model_type"]):
        value = config.get(key, default(config) if callable(default) else default)
        if key == "n_inner" and value == 4 * config.get("n_embd", 0):
            value = None  # GPT2Config's null means 4 · n_embd
        if not same(value, expected.get(key)):
            lines.append(f"{key}: config.json {json.dumps(value)}, deck {deck_key} {json.dumps(expected.get(key))}")
    head_dim = expected.get("hidden_size", 0) // expected.get("num_attention_heads", 1)
    if expected["model_type"] != "gpt2" and config.get("head_dim") not in (None, head_dim):
        lines.append(f"head_dim: config.json {config['head_dim']}, deck model.d_model / model.heads {head_dim}")
    positions = config.get("n_positions", 1024) if expected["model_type"] == "gpt2" else None
    if positions is not None and positions < seq_len:
        lines.append(f"n_positions: config.json {positions} position embeddings, deck model.seq_len {seq_len}")
    window = config.get("sliding_window")
    if window is not None and window < seq_len and config.get("use_sliding_window", True):
        lines.append(f"sliding_window: config.json {window}, deck model.seq_len {seq_len} (trident attends to every "
                     "earlier token)")
    return lines


def model_tensors(model):
    """[(trident name, shape)] of every tensor of the deck's model (DESIGN.md "Checkpoint")."""
    C, V, L = model["d_model"], model["vocab"], model["layers"]
    if model.get("family", "gpt2") == "gpt2":
        per_layer = [("ln_1.weight", [C]), ("ln_1.bias", [C]), ("attn.c_attn.weight", [C, 3 * C]),
                     ("attn.c_attn.bias", [3 * C]), ("attn.c_proj.weight", [C, C]), ("attn.c_proj.bias", [C]),
                     ("ln_2.weight", [C]), ("ln_2.bias", [C]), ("mlp.c_fc.weight", [C, 4 * C]),
                     ("mlp.c_fc.bias", [4 * C]), ("mlp.c_proj.weight", [4 * C, C]), ("mlp.c_proj.bias", [C])]
        return ([("wte.weight", [V, C]), ("wpe.weight", [model["seq_len"], C])] +
                [(f"h.{i}.{name}", shape) for i in range(L) for name, shape in per_layer] +
                [("ln_f.weight", [C]), ("ln_f.bias", [C])])
    H = model["heads"]
    hd, KV, F = C // H, model.get("kv_heads", H), model["ffn_hidden"]
    attention = [("input_layernorm.weight", [C]), ("self_attn.q_proj.weight", [H * hd, C]),
                 ("self_attn.k_proj.weight", [KV * hd, C]), ("self_attn.v_proj.weight", [KV * hd, C]),
                 ("self_attn.o_proj.weight", [C, H * hd]), ("post_attention_layernorm.weight", [C])]
    dense = [("mlp.gate_proj.weight", [F, C]), ("mlp.up_proj.weight", [F, C]), ("mlp.down_proj.weight", [C, F])]
    moe = model.get("moe")
    names = [("embed_tokens.weight", [V, C])]
    for i in range(L):
        mlp = dense
        if moe and i % moe.get("layer_freq", 1) == 0:
            E, Fe = moe["experts"], moe.get("expert_ffn_hidden", F)
            mlp = [("block_sparse_moe.gate.weight", [E, C])] + [
                (f"block_sparse_moe.experts.{e}.{w}.weight", shape) for e in range(E)
                for w, shape in (("w1", [Fe, C]), ("w3", [Fe, C]), ("w2", [C, Fe]))]
        names += [(f"layers.{i}.{name}", shape) for name, shape in attention + mlp]
    names.append(("norm.weight", [C]))
    if not model.get("tie_embeddings", False):
        names.append(("lm_head.weight", [V, C]))
    return names


def hf_names(name, model_type):
    """The state-dict keys a trident tensor may have in a folder: with the architecture's prefix, and
    without it (a base model's state dict: GPT2Model, LlamaModel)."""
    if model_type == "gpt2":
        return ["transformer." + name, name]
    return [name] if name == "lm_head.weight" else ["model." + name, name]


class HfFolder:
    """config.json and the weights of a folder, whichever of Hugging Face's layouts holds them."""

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.is_dir():
            raise PostError(f"{self.path}: not a directory (a Hugging Face model folder holds config.json and "
                            "the weights)")
        self.config = self._config()
        self.files, self.where = self._weights()

    def _config(self):
        file = self.path / "config.json"
        try:
            config = json.loads(file.read_text())
        except FileNotFoundError:
            raise PostError(f"{file}: missing; a Hugging Face model folder has config.json beside its weights")
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise PostError(f"{file}: cannot be read as JSON ({e})")
        if not isinstance(config, dict):
            raise PostError(f"{file}: not a JSON object")
        return config

    def _weights(self):
        """({file name: reader}, {tensor name: file name})."""
        for index_name, single, opener in (("model.safetensors.index.json", "model.safetensors", SafetensorsFile),
                                           ("pytorch_model.bin.index.json", "pytorch_model.bin", TorchFile)):
            if (self.path / single).is_file():
                reader = opener(self.path / single)
                return {single: reader}, {name: single for name in reader.tensors}
            if (self.path / index_name).is_file():
                return self._sharded(self.path / index_name, opener)
        raise PostError(f"{self.path}: no weights (model.safetensors, model.safetensors.index.json, "
                        "pytorch_model.bin or pytorch_model.bin.index.json)")

    def _sharded(self, index, opener):
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise PostError(f"{index}: not a shard index with a weight_map ({e})")
        files = {}
        for file in sorted(set(weight_map.values())):
            if not (self.path / file).is_file():
                raise PostError(f"{index} names shard {file}, which is missing from {self.path}")
            files[file] = opener(self.path / file)
        for name, file in weight_map.items():
            if name not in files[file].tensors:
                raise PostError(f"{index} puts tensor {name} in {file}, which does not hold it")
        return files, dict(weight_map)

    def find(self, name, model_type):
        """The folder's key for trident's tensor `name`, or None."""
        return next((key for key in hf_names(name, model_type) if key in self.where), None)

    def shape(self, key):
        return list(self.files[self.where[key]].tensors[key]["shape"])

    def read(self, key):
        return self.files[self.where[key]].read(key)


class TorchFile:
    """pytorch_model.bin (torch.save of a state dict), loaded whole with torch."""

    def __init__(self, path):
        from .ckpt import import_torch
        torch = import_torch()
        try:
            state = torch.load(path, map_location="cpu")
        except Exception as e:  # torch raises RuntimeError, pickle errors, EOFError, ...
            raise PostError(f"{path}: cannot be loaded with torch.load ({e})")
        if not isinstance(state, dict):
            raise PostError(f"{path}: holds a {type(state).__name__}, not a state dict")
        self.path = path
        self.state = state
        self.tensors = {name: {"shape": list(value.shape), "dtype": str(value.dtype)} for name, value in state.items()
                        if hasattr(value, "shape")}

    def read(self, name):
        value = self.state[name]
        if not value.is_floating_point():
            raise PostError(f"{self.path}: tensor {name} is {value.dtype}, not floating point")
        return value.float().numpy()

