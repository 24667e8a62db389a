"""Starting from Hugging Face weights (DESIGN.md "Checkpoint", "Starting from published weights"):
the safetensors reader and writer against files composed here byte by byte (struct, json, numpy,
torch's bf16 rounding); `trident-post import` and `checkpoint.init` (a trident checkpoint, or
"hf:DIR" read by the ranks in place) from folders written here with plain PyTorch, whose first-step
loss equals a float64 PyTorch model's on the same batch; export -> import bitwise; every mismatch
and every bad file exit 2 naming what is wrong, with nothing written."""
import json
import struct
import sys

import h5py
import numpy as np
import torch

from conftest import REPO, post, read_steps, run_trident

sys.path.insert(0, str(REPO / "postprocess"))
from trident_post import safetensors  # noqa: E402
from gpt2_reference import causal_lm_loss as gpt2_loss  # noqa: E402
from llama_reference import causal_lm_loss as llama_loss  # noqa: E402
from mixtral_reference import Mixtral  # noqa: E402

LLAMA = REPO / "input_decks" / "llama-tiny.toml"
MOE = REPO / "input_decks" / "moe-tiny.toml"
T, MBS, M = 16, 2, 2
C, H, KV, F, L = 32, 4, 2, 48, 2
LLAMA_SHAPE = (f"model.layers={L}", f"model.d_model={C}", f"model.heads={H}", f"model.kv_heads={KV}",
               f"model.ffn_hidden={F}", f"model.seq_len={T}", "model.rope_theta=10000.0", "model.norm_eps=1e-6")
GPT2_SHAPE = (f"model.layers={L}", f"model.d_model={C}", f"model.heads={H}", f"model.seq_len={T}",
              "model.vocab=256")
BATCH = (f"schedule.micro_batch_size={MBS}", f"schedule.microbatches={M}", "train.steps=1", "output.log_every=1")


def compose_safetensors(path, tensors, metadata=None):
    """The published layout, written here without trident's writer: {name: (dtype, shape, bytes)}."""
    header, data, offset = ({"__metadata__": metadata} if metadata else {}), b"", 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        data, offset = data + raw, offset + len(raw)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def bf16_bits(values):
    return torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def test_reader_reads_independently_written_files(tmp_path):
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(shape).astype(np.float32) for shape in ((3, 5), (7,), (2, 2)))
    compose_safetensors(tmp_path / "x.safetensors", {
        "a": ("F32", a.shape, a.tobytes()), "b": ("BF16", b.shape, bf16_bits(b).tobytes()),
        "c": ("F16", c.shape, c.astype("<f2").tobytes())}, metadata={"format": "pt"})
    reader = safetensors.SafetensorsFile(tmp_path / "x.safetensors")
    assert np.array_equal(reader.read("a"), a)
    assert np.array_equal(reader.read("b"), torch.from_numpy(b).to(torch.bfloat16).float().numpy())
    assert np.array_equal(reader.read("c"), c.astype(np.float16).astype(np.float32))


def test_writer_follows_the_format(tmp_path):
    rng = np.random.default_rng(2)
    tensors = {f"t{k}": rng.standard_normal((k + 1, 3)).astype(np.float32) for k in range(5)}
    files = safetensors.write_folder(tmp_path, tensors, "BF16", shard_bytes=40)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert files[-1] == "model.safetensors.index.json" and len(files) > 2
    assert set(index["weight_map"]) == set(tensors)
    assert index["metadata"]["total_size"] == sum(v.size * 2 for v in tensors.values())
    for name, file in index["weight_map"].items():
        raw = (tmp_path / file).read_bytes()
        (length,) = struct.unpack("<Q", raw[:8])
        assert (8 + length) % 8 == 0  # the data starts aligned
        entry = json.loads(raw[8:8 + length])[name]
        assert entry["dtype"] == "BF16" and entry["shape"] == list(tensors[name].shape)
        begin, end = entry["data_offsets"]
        stored = np.frombuffer(raw[8 + length + begin:8 + length + end], dtype="<u2").reshape(tensors[name].shape)
        assert np.array_equal(stored, bf16_bits(tensors[name]))


def llama_state(rng, vocab, tied=False):
    """A LlamaForCausalLM state dict in Hugging Face's names, GQA, random non-zero weights."""
    hd = C // H
    shapes = {"input_layernorm": [C], "self_attn.q_proj": [H * hd, C], "self_attn.k_proj": [KV * hd, C],
              "self_attn.v_proj": [KV * hd, C], "self_attn.o_proj": [C, H * hd], "post_attention_layernorm": [C],
              "mlp.gate_proj": [F, C], "mlp.up_proj": [F, C], "mlp.down_proj": [C, F]}
    state = {"model.embed_tokens.weight": [vocab, C], "model.norm.weight": [C]}
    state.update({f"model.layers.{i}.{name}.weight": shape for i in range(L) for name, shape in shapes.items()})
    if not tied:
        state["lm_head.weight"] = [vocab, C]
    return {k: torch.from_numpy((0.3 * rng.standard_normal(s) + (1.0 if len(s) == 1 else 0.0)).astype(np.float32))
            for k, s in state.items()}


def llama_config(vocab, **changes):
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": C, "num_hidden_layers": L,
            "num_attention_heads": H, "num_key_value_heads": KV, "intermediate_size": F, "vocab_size": vocab,
            "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "hidden_act": "silu",
            **changes}


def write_llm_c_shard(path, tokens):
    header = np.zeros(256, dtype="<i4")
    header[:3] = (20240520, 1, len(tokens))
    path.write_bytes(header.tobytes() + tokens.astype("<u2").tobytes())


def first_batch(tokens, global_batch):
    inputs = np.stack([tokens[w * T:w * T + T] for w in range(global_batch)])
    targets = np.stack([tokens[w * T + 1:w * T + T + 1] for w in range(global_batch)])
    return torch.from_numpy(inputs.astype(np.int64)), torch.from_numpy(targets.astype(np.int64))


def test_llama_folder_of_shards_trains_from_hf_dir(trident_run, tmp_path):
    """Safetensors shards written here, read in place by 2 TP ranks (vocabulary 255, padded to 256
    inside): step 1's loss is the float64 model's."""
    vocab, rng = 255, np.random.default_rng(3)
    state = llama_state(rng, vocab)
    folder = tmp_path / "hf"
    folder.mkdir()
    names = sorted(state)
    halves = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for file, part in halves.items():
        compose_safetensors(folder / file, {n: ("F32", state[n].shape, state[n].numpy().tobytes()) for n in part})
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {n: file for file, part in halves.items() for n in part}}))
    (folder / "config.json").write_text(json.dumps(llama_config(vocab)))
    tokens = rng.integers(0, vocab, size=2000)
    write_llm_c_shard(tmp_path / "data.bin", tokens)

    _, run_dir = trident_run(*LLAMA_SHAPE, *BATCH, f"model.vocab={vocab}", "data.kind=bin",
                             f"data.path={tmp_path / 'data.bin'}", f"checkpoint.init=hf:{folder}", "parallel.tp=2",
                             ranks=2, deck=LLAMA)
    params = {k[len("model."):] if k.startswith("model.") else k: v.double() for k, v in state.items()}
    with torch.no_grad():
        want = llama_loss(*first_batch(tokens, MBS * M), params,
                          {"layers": L, "heads": H, "kv_heads": KV, "norm_eps": 1e-6, "rope_theta": 10000.0}).item()
    got = read_steps(run_dir)["loss"][0]
    assert abs(got - want) < 1e-5 * want, (got, want)


def test_mixtral_folder_trains_with_experts_split(trident_run, tmp_path):
    """A MixtralForCausalLM state dict in bf16 (torch.save's BFloat16Storage), read in place by 2 ranks
    holding 2 of the 4 experts each (ep 2): step 1's cross-entropy is the float64 Mixtral's."""
    rng, E, Fe = np.random.default_rng(6), 4, 24
    state = llama_state(rng, 256)
    for i in range(L):
        for name in ("gate_proj", "up_proj", "down_proj"):
            del state[f"model.layers.{i}.mlp.{name}.weight"]
        moe = f"model.layers.{i}.block_sparse_moe."
        state[moe + "gate.weight"] = torch.from_numpy(rng.standard_normal((E, C)).astype(np.float32))
        for e in range(E):
            for w, shape in (("w1", (Fe, C)), ("w3", (Fe, C)), ("w2", (C, Fe))):
                state[f"{moe}experts.{e}.{w}.weight"] = torch.from_numpy(0.3 * rng.standard_normal(shape)
                                                                         .astype(np.float32))
    folder = tmp_path / "hf"
    folder.mkdir()
    state = {n: v.to(torch.bfloat16) for n, v in state.items()}  # as published: bf16 storages
    torch.save(state, folder / "pytorch_model.bin")
    (folder / "config.json").write_text(json.dumps(llama_config(256, model_type="mixtral", intermediate_size=Fe,
                                                                num_local_experts=E, num_experts_per_tok=2)))
    tokens = rng.integers(0, 256, size=3000).astype(np.uint8)
    (tmp_path / "corpus.txt").write_bytes(tokens.tobytes())
    _, run_dir = trident_run(*LLAMA_SHAPE, *BATCH, f"model.moe.experts={E}", f"model.moe.expert_ffn_hidden={Fe}",
                             "data.kind=text", f"data.path={tmp_path / 'corpus.txt'}", f"checkpoint.init=hf:{folder}",
                             "parallel.dp=2", "parallel.ep=2", ranks=2, deck=MOE)
    params = {k[len("model."):] if k.startswith("model.") else k: v.double() for k, v in state.items()}
    cfg = {"layers": L, "heads": H, "kv_heads": KV, "norm_eps": 1e-6, "rope_theta": 10000.0}
    with torch.no_grad():
        want = llama_loss(*first_batch(tokens, 2 * MBS * M), params, cfg, mlp=Mixtral({"experts": E, "top_k": 2}))
    got = read_steps(run_dir)["loss"][0]
    assert abs(got - want.item()) < 1e-5 * want.item(), (got, want.item())


def gpt2_folder(folder, rng, positions):
    """GPT2LMHeadModel's state dict as torch.save writes it (pytorch_model.bin), with the causal-mask
    buffers old checkpoints carry and a position table longer than the deck's seq_len."""
    per_layer = {"ln_1.weight": [C], "ln_1.bias": [C], "attn.c_attn.weight": [C, 3 * C], "attn.c_attn.bias": [3 * C],
                 "attn.c_proj.weight": [C, C], "attn.c_proj.bias": [C], "ln_2.weight": [C], "ln_2.bias": [C],
                 "mlp.c_fc.weight": [C, 4 * C], "mlp.c_fc.bias": [4 * C], "mlp.c_proj.weight": [4 * C, C],
                 "mlp.c_proj.bias": [C]}
    shapes = {"wte.weight": [256, C], "wpe.weight": [positions, C], "ln_f.weight": [C], "ln_f.bias": [C]}
    shapes.update({f"h.{i}.{name}": shape for i in range(L) for name, shape in per_layer.items()})
    params = {k: torch.from_numpy((0.2 * rng.standard_normal(s)).astype(np.float32)) for k, s in shapes.items()}
    state = {"transformer." + k: v for k, v in params.items()}
    state["lm_head.weight"] = state["transformer.wte.weight"]
    state.update({f"transformer.h.{i}.attn.bias": torch.tril(torch.ones(1, 1, positions, positions))
                  for i in range(L)})
    folder.mkdir()
    torch.save(state, folder / "pytorch_model.bin")
    (folder / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
                                                    "n_embd": C, "n_head": H, "n_layer": L, "n_positions": positions,
                                                    "vocab_size": 256, "activation_function": "gelu_new"}))
    return params


def test_gpt2_bin_imports_and_trains_on_a_grid(trident_run, tmp_path):
    """pytorch_model.bin through `trident-post import`, then checkpoint.init on tp 2 x pp 2; and the
    same weights sharded in torch.save files that the ranks read in place ("hf:DIR")."""
    rng = np.random.default_rng(4)
    params = gpt2_folder(tmp_path / "hf", rng, positions=2 * T)
    deck = tmp_path / "deck.toml"
    deck.write_text((REPO / "input_decks" / "tiny.toml").read_text())
    out = post("import", tmp_path / "hf", "--deck", deck, *sum((["--set", s] for s in GPT2_SHAPE), []),
               "--out", tmp_path / "init.h5")
    assert "step 0" in out.stdout and "attn.bias" in out.stderr  # the buffers are named as not imported
    tokens = rng.integers(0, 256, size=3000).astype(np.uint8)
    (tmp_path / "corpus.txt").write_bytes(tokens.tobytes())
    _, run_dir = trident_run(*GPT2_SHAPE, *BATCH, "data.kind=text", f"data.path={tmp_path / 'corpus.txt'}",
                             f"checkpoint.init={tmp_path / 'init.h5'}", "parallel.tp=2", "parallel.pp=2", ranks=4)
    reference = {k: v.double() for k, v in params.items()}
    reference["wpe.weight"] = reference["wpe.weight"][:T]
    with torch.no_grad():
        want = gpt2_loss(*first_batch(tokens, MBS * M), reference, {"layers": L, "heads": H}).item()
    got = read_steps(run_dir)["loss"][0]
    assert abs(got - want) < 1e-5 * want, (got, want)
    # The imported checkpoint also resumes (its step 0, AdamW's moments zero) on another grid.
    proc, run_dir = trident_run(*GPT2_SHAPE, *BATCH, "data.kind=text", f"data.path={tmp_path / 'corpus.txt'}",
                                f"checkpoint.resume={tmp_path / 'init.h5'}", "parallel.tp=2", ranks=2)
    assert "step 0, written on grid imported" in proc.stdout, proc.stdout
    got = read_steps(run_dir)["loss"][0]
    assert abs(got - want) < 1e-5 * want, (got, want)

    # The same weights as two torch.save shards with pytorch_model.bin.index.json, read in place.
    state = torch.load(tmp_path / "hf" / "pytorch_model.bin")
    sharded = tmp_path / "hf-sharded"
    sharded.mkdir()
    names = sorted(state)
    halves = {"pytorch_model-00001-of-00002.bin": names[::2], "pytorch_model-00002-of-00002.bin": names[1::2]}
    for file, part in halves.items():
        torch.save({n: state[n].clone() for n in part}, sharded / file)
    (sharded / "pytorch_model.bin.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {n: file for file, part in halves.items() for n in part}}))
    (sharded / "config.json").write_text((tmp_path / "hf" / "config.json").read_text())
    _, run_dir = trident_run(*GPT2_SHAPE, *BATCH, "data.kind=text", f"data.path={tmp_path / 'corpus.txt'}",
                             f"checkpoint.init=hf:{sharded}", "parallel.tp=2", ranks=2)
    got = read_steps(run_dir)["loss"][0]
    assert abs(got - want) < 1e-5 * want, (got, want)


def export_and_import(trident_run, tmp_path, deck, settings):
    """Trains 2 steps, exports (sharded safetensors), imports; returns the two files' /model names
    (asserting every dataset bitwise equal) and the imported checkpoint."""
    _, run_dir = trident_run(*settings, *BATCH, "train.steps=2", deck=deck)
    checkpoint = run_dir / "checkpoints" / "step_00000002.h5"
    post("export", checkpoint, "-o", tmp_path / "hf", "--shard-size", "20KB")
    assert (tmp_path / "hf" / "model.safetensors.index.json").is_file()
    post("import", tmp_path / "hf", "--deck", deck, *sum((["--set", s] for s in settings), []),
         "--out", tmp_path / "back.h5")
    post("ckpt", "-q", tmp_path / "back.h5")  # every checksum verifies
    names = {}
    with h5py.File(checkpoint, "r") as a, h5py.File(tmp_path / "back.h5", "r") as b:
        for f in (a, b):
            names[f] = []
            f["model"].visititems(lambda n, o: names[f].append(n) if isinstance(o, h5py.Dataset) else None)
        assert names[a] == names[b]
        for name in names[a]:
            assert np.array_equal(a["model"][name][()], b["model"][name][()]), name
        assert b.attrs["step"] == 0 and not np.any(b["optimizer/m"][names[a][0]][()])
        return names[a], tmp_path / "back.h5"


def test_mixtral_export_then_import_is_bitwise(trident_run, tmp_path):
    moe = ("model.moe.experts=4", "model.moe.expert_ffn_hidden=24", "parallel.ep=1")
    names, _ = export_and_import(trident_run, tmp_path, MOE, LLAMA_SHAPE + moe)
    assert len(names) == 3 + (6 + 1 + 3 * 4) * L


def test_export_then_import_is_bitwise(trident_run, tmp_path):
    names, back = export_and_import(trident_run, tmp_path, LLAMA, LLAMA_SHAPE)
    assert len(names) == 3 + 9 * L

    # A run started from it, stopped and run again, resumes its own checkpoint, not the init.
    again = (*LLAMA_SHAPE, *BATCH, f"checkpoint.init={back}")
    first = run_trident(tmp_path / "tuned", *again, deck=LLAMA)
    assert "init    " in first.stdout and "AdamW starts at zero" in first.stdout, first.stdout
    second = run_trident(tmp_path / "tuned", *again, "train.steps=2", deck=LLAMA)
    assert "resume  " in second.stdout and "init    " not in second.stdout, second.stdout


def test_mismatches_and_bad_files_exit_2_writing_nothing(tmp_path):
    rng = np.random.default_rng(5)
    state = llama_state(rng, 256)
    folder = tmp_path / "hf"
    folder.mkdir()
    tensors = {n: ("F32", v.shape, v.numpy().tobytes()) for n, v in state.items()}
    deck_args = ("--deck", LLAMA, *sum((["--set", s] for s in LLAMA_SHAPE), []), "--out", tmp_path / "x.h5")

    def refused(*needles):
        result = post("import", folder, *deck_args, expect=2)
        assert all(n in result.stderr for n in needles), result.stderr
        assert not (tmp_path / "x.h5").exists() and not (tmp_path / "x.h5.tmp").exists()

    (folder / "config.json").write_text(json.dumps(llama_config(256, num_key_value_heads=4, rope_theta=500000.0,
                                                                rope_scaling={"rope_type": "llama3"})))
    compose_safetensors(folder / "model.safetensors", tensors)
    refused("num_key_value_heads: config.json 4, deck model.kv_heads 2", "rope_theta", "rope_scaling")
    (folder / "config.json").write_text(json.dumps(llama_config(256)))
    raw = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(raw[:-100])
    refused("model.safetensors", "truncated")
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", 1 << 20) + raw[8:])
    refused("model.safetensors", "header length")
    ids = dict(tensors, **{"model.norm.weight": ("I32", [C], np.arange(C, dtype="<i4").tobytes())})
    compose_safetensors(folder / "model.safetensors", ids)
    refused("model.norm.weight", "I32")
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {n: "model-00001-of-00001.safetensors" for n in tensors}}))
    refused("model-00001-of-00001.safetensors", "missing")


def test_hf_dir_mismatch_is_refused_before_training(trident_run, tmp_path):
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(llama_config(256, hidden_size=64)))
    proc, run_dir = trident_run(*LLAMA_SHAPE, f"checkpoint.init=hf:{folder}", deck=LLAMA, expect=2)
    assert "hidden_size: config.json 64, deck model.d_model 32" in proc.stderr + proc.stdout
    assert not (run_dir / "checkpoints").exists()
