"""`trident plan DECK --machine FILE` (DESIGN.md "Machine files and step prediction"): the JSON
prediction's contract, bad machine files, and the predictions against published end-to-end runs.

Megatron-LM on NVIDIA's Selene (DGX A100 80GB nodes, 8 x 200 Gb/s HDR InfiniBand per node), from
D. Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC21, arXiv:2104.04473: Table 1 (weak scaling; GPT models, sequence 2048, vocabulary
51,200, 16-bit mixed precision, activation recomputation, the interleaved schedule where the
pipeline has one) and the text's GPT-3 175B run (1024 GPUs, batch 1536, 140 TFLOP/s per GPU). The
paper counts FLOPs with the recomputation's extra forward and full (unmasked) attention:
96 B s l h^2 (1 + s / (6h) + V / (16 l h)) per iteration. The micro-batch size is 1 (the GPT-3
example of Megatron-LM). input_decks/machines/dgx-a100-80g.toml's GEMM-efficiency curve is the one
calibrated part: an a-priori shape scaled by the single factor that balances the errors of the 1T
and the 175B runs (the two the issue names); every other row is a check.
"""
import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
A100 = REPO / "input_decks" / "machines" / "dgx-a100-80g.toml"
GPT3 = REPO / "input_decks" / "gpt3-175b.toml"
H100 = REPO / "input_decks" / "machines" / "dgx-h100.toml"
LLAMA = REPO / "input_decks" / "llama3-405b.toml"

# (name, heads, hidden, layers, tp, pp, GPUs, batch, published TFLOP/s per GPU)
PUBLISHED = [
    ("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137),
    ("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138),
    ("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142),
    ("18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135),
    ("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138),
    ("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140),
    ("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148),
    ("310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155),
    ("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163),
    ("1008B", 160, 25600, 128, 8, 64, 3072, 3072, 163),
    ("GPT-3 175B", 96, 12288, 96, 8, 16, 1024, 1536, 140),
]
SEQ, VOCAB = 2048, 51200
# The sanitizer build predicts one published run and skips the search: the rest is the same code
# on bigger numbers, and simulating 3072-rank pipelines under AddressSanitizer takes minutes.
RELEASE_ONLY = pytest.mark.skipif(os.environ.get("TRIDENT_SANITIZED") == "1", reason="release build only")


def trident(*args, expect=0):
    exe = os.environ.get("TRIDENT_EXE")
    if not exe or not Path(exe).exists():
        pytest.fail(f"TRIDENT_EXE is unset or missing ({exe!r}): run through ctest")
    proc = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == expect, f"trident {' '.join(map(str, args))} exited {proc.returncode}\n{proc.stderr}"
    return proc


def predict(deck, machine, *overrides):
    sets = [a for o in overrides for a in ("--set", o)]
    return json.loads(trident("plan", deck, "--machine", machine, "--json", *sets).stdout)


def selene_overrides(heads, hidden, layers, tp, pp, gpus, batch):
    dp = gpus // (tp * pp)
    m = batch // dp
    v = 2 if pp > 1 and layers % (2 * pp) == 0 and m % pp == 0 else 1
    return (f"model.layers={layers}", f"model.d_model={hidden}", f"model.heads={heads}", f"model.seq_len={SEQ}",
            f"model.vocab={VOCAB}", 'model.attention="explicit"', f"parallel.tp={tp}", f"parallel.pp={pp}",
            f"parallel.dp={dp}", f"schedule.kind={'interleaved-1f1b' if v == 2 else '1f1b'}",
            f"schedule.virtual_stages={v}", f"schedule.microbatches={m}", "schedule.micro_batch_size=1",
            'schedule.recompute="full"', 'train.precision="bf16"')


def paper_flops(batch, layers, hidden):
    return 96 * batch * SEQ * layers * hidden ** 2 * (1 + SEQ / (6 * hidden) + VOCAB / (16 * layers * hidden))


@pytest.mark.parametrize("name,heads,hidden,layers,tp,pp,gpus,batch,published",
                         [pytest.param(*row, id=row[0], marks=() if row[0] == "39.1B" else RELEASE_ONLY)
                          for row in PUBLISHED])
def test_selene_throughput_within_15_percent_of_the_published(name, heads, hidden, layers, tp, pp, gpus, batch,
                                                              published):
    p = predict(GPT3, A100, *selene_overrides(heads, hidden, layers, tp, pp, gpus, batch))
    assert p["devices"] == gpus and p["fits"], p
    tflops = paper_flops(batch, layers, hidden) / p["step_time_s"] / gpus / 1e12
    print(f"{name}: predicted {tflops:.0f} TFLOP/s per GPU, published {published} ({tflops / published - 1:+.1%})")
    assert abs(tflops / published - 1) <= 0.15, f"{name}: predicted {tflops:.1f}, published {published}"


# Runs on another machine, DGX H100 (input_decks/machines/dgx-h100.toml, not calibrated on any of them): NVIDIA's
# Nemotron-4 340B, 96 layers, hidden 18432, 96 heads, 8 key/value heads, sequence 4096, vocabulary 256,000, bf16.
# Its MLP (squared ReLU, two 18432 x 73728 matrices) is modelled by the llama family's SwiGLU of width 49152:
# three matrices of the same weights and FLOPs. Step times are compared, so no FLOP convention enters; `fits` is
# not asserted (trident keeps fp32 weights and moments, Megatron bf16 weights and a distributed optimizer).
# - NVIDIA DGXC Benchmarking recipe "Nemotron4 340B" 24.11 (NGC catalog, nemotron340b-dgxc-benchmarking-a):
#   BF16 on 128 H100, TP 8, PP 8, VP 12, micro-batch 1, GA 16, global batch 32: 4.77 s per step. It does not
#   say recomputation: none is predicted (selective differs by under 1%).
# - "Nemotron-4 340B Technical Report" (NVIDIA, 2024; Nemotron_4_340B_8T_0.pdf), Table 2, the largest stage:
#   6144 H100, TP 8, PP 12, DP 64, global batch 2304: 8.0 s per iteration. The chunks per stage are not in the
#   figures used here: every count that divides the 8 layers per stage must predict within 15%.
NEMOTRON_340B = ("model.layers=96", "model.d_model=18432", "model.heads=96", "model.kv_heads=8",
                 "model.ffn_hidden=49152", "model.seq_len=4096", "model.vocab=256000", "parallel.sequence_parallel=true",
                 "schedule.micro_batch_size=1", 'train.precision="bf16"')


def nemotron_overrides(pp, dp, microbatches, v, recompute):
    return (*NEMOTRON_340B, "parallel.tp=8", f"parallel.pp={pp}", f"parallel.dp={dp}",
            f"schedule.kind={'interleaved-1f1b' if v > 1 else '1f1b'}", f"schedule.virtual_stages={v}",
            f"schedule.microbatches={microbatches}", f'schedule.recompute="{recompute}"')


@pytest.mark.parametrize("name,pp,dp,microbatches,v,recompute,published_s", [
    pytest.param("DGXC 24.11, 128 GPUs", 8, 2, 16, 12, "none", 4.77, id="dgxc-128"),
    *[pytest.param("report Table 2, 6144 GPUs", 12, 64, 36, v, "selective", 8.0, id=f"report-6144-v{v}",
                   marks=RELEASE_ONLY) for v in (1, 2, 4, 8)],
])
def test_h100_step_time_within_15_percent_of_the_published(name, pp, dp, microbatches, v, recompute, published_s):
    p = predict(LLAMA, H100, *nemotron_overrides(pp, dp, microbatches, v, recompute))
    assert p["devices"] == 8 * pp * dp, p
    predicted = p["step_time_s"]
    print(f"Nemotron-4 340B, {name}, v {v}: predicted {predicted:.2f} s, published {published_s} "
          f"({predicted / published_s - 1:+.1%})")
    assert abs(predicted / published_s - 1) <= 0.15, f"{name} v {v}: predicted {predicted:.2f} s, published {published_s}"


# Meta's Llama 3 405B (Llama Team, "The Llama 3 Herd of Models", 2024, table 4) on 16,384 H100: the 8K stage
# (TP 8, PP 16, DP 128: 400 TFLOP/s per GPU) and the long-context stage (TP 8, CP 16, PP 16, DP 8 at 131,072
# tokens: 380 TFLOP/s), 16 sequences per DP replica, bf16, the model's own FLOPs (plan/model_size.hpp) per GPU.
# The paper runs an interleaved schedule without giving its virtual stages: 2 in both (4 predicts 386 and 450,
# the second 18% over). Not asserted: `fits` (trident keeps fp32 weights and AdamW moments).
LLAMA_131K = REPO / "input_decks" / "llama3-405b-131k.toml"


@pytest.mark.parametrize("name,overrides,published", [
    ("8K stage", ("model.seq_len=8192", "parallel.cp=1", "parallel.dp=128"), 400),
    ("131K stage, CP 16", (), 380),
])
def test_llama3_405b_within_15_percent_of_the_published(name, overrides, published):
    p = predict(LLAMA_131K, H100, *overrides)
    assert p["devices"] == 16384, p
    print(f"Llama 3 405B {name}: predicted {p['tflops_per_device']:.0f} TFLOP/s per GPU, published {published} "
          f"({p['tflops_per_device'] / published - 1:+.1%}); CP ring exposed {p['cp_comm_s']:.3f} s "
          f"of {p['step_time_s']:.2f} s")
    assert abs(p["tflops_per_device"] / published - 1) <= 0.15, f"{name}: {p['tflops_per_device']:.1f}"
    assert (p["cp_comm_s"] > 0) == (p["cp"] > 1), p


def test_json_has_the_promised_keys_and_agrees_with_itself():
    p = predict(REPO / "input_decks" / "gpt2-124m.toml", A100, 'train.precision="bf16"')
    for key in ("step_time_s", "tokens_per_s", "tflops_per_device", "mfu", "bubble", "memory_per_rank_bytes", "fits"):
        assert key in p, key
    assert len(p["memory_per_rank_bytes"]) == p["pp"]
    assert p["tokens_per_s"] > 0 and 0 < p["mfu"] < 1
    parts = p["pipeline_s"] + p["embedding_sync_s"] + p["dp_exposed_s"] + p["optimizer_s"]
    assert abs(parts - p["step_time_s"]) <= 1e-9 * p["step_time_s"], p
    assert abs(p["tflops_per_device"] / p["mfu"] - 312) < 1e-6 * 312, "MFU is against the bf16 peak"
    assert abs(p["tokens_per_s"] * p["step_time_s"] - p["microbatches"] * p["micro_batch_size"] * p["dp"] * 1024) < 1e-6
    assert p["fits"] is True


def test_a_rank_that_cannot_fit_is_reported():
    p = predict(GPT3, A100, "parallel.tp=1", "parallel.pp=1", "parallel.dp=1", "schedule.microbatches=1")
    assert p["fits"] is False and max(p["memory_per_rank_bytes"]) > p["device_memory_bytes"], p


def test_text_prediction_follows_the_plan():
    out = trident("plan", REPO / "input_decks" / "small.toml", "--machine", A100).stdout
    assert "Predicted step on DGX A100 80GB (as Selene)" in out, out
    assert out.index("Predicted step") < out.index("Schedules"), out


def test_bad_machine_file_exits_2_naming_file_line_and_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(A100.read_text().replace("inter_node_gbs = 23", "inter_node_gbps = 23"))
    proc = trident("plan", REPO / "input_decks" / "small.toml", "--machine", bad, expect=2)
    assert proc.stderr.count("trident: error:") == 1, proc.stderr
    assert f"{bad}:" in proc.stderr and "network.inter_node_gbps" in proc.stderr, proc.stderr
    assert "did you mean `network.inter_node_gbs`" in proc.stderr, proc.stderr
    missing = trident("plan", REPO / "input_decks" / "small.toml", "--machine", tmp_path / "none.toml", expect=2)
    assert "machine file not found" in missing.stderr, missing.stderr
    no_machine = trident("plan", REPO / "input_decks" / "small.toml", "--json", expect=2)
    assert "--machine FILE" in no_machine.stderr, no_machine.stderr


@RELEASE_ONLY
def test_search_ranks_grids_that_fit_fastest_first_and_each_is_its_own_prediction():
    sets = ["--set", 'train.precision="bf16"', "--set", "schedule.microbatches=192"]
    result = json.loads(trident("plan", GPT3, "--machine", A100, "--search", "--json", *sets).stdout)
    candidates = result["candidates"]
    assert result["devices"] == 1024 and 0 < len(candidates) <= 10 and result["over_memory"] > 0, result
    times = [c["step_time_s"] for c in candidates]
    assert times == sorted(times), times
    assert all(c["fits"] and c["devices"] == 1024 for c in candidates), candidates
    assert all(c["microbatches"] * c["micro_batch_size"] * c["dp"] == 192 * 8 for c in candidates), "the global batch"
    assert all(c["tp"] * c["cp"] * c["pp"] * c["dp"] == 1024 for c in candidates), candidates
    assert {c["cp"] for c in candidates} != {1}, "context parallelism is among the choices searched"
    # The fastest, predicted alone with its settings, takes the time the search gave it.
    best = candidates[0]
    alone = predict(GPT3, A100, 'train.precision="bf16"', f"parallel.tp={best['tp']}", f"parallel.cp={best['cp']}",
                    f"parallel.pp={best['pp']}",
                    f"parallel.dp={best['dp']}", f"schedule.kind={best['schedule']}",
                    f"schedule.virtual_stages={best['virtual_stages']}", f"schedule.microbatches={best['microbatches']}",
                    f"schedule.micro_batch_size={best['micro_batch_size']}", f"schedule.recompute=\"{best['recompute']}\"")
    assert alone["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-12), (alone, best)
    # The deck's own grid is predicted alike and placed among them: the grids shown faster than it
    # are all the faster ones when some shown are not.
    deck = result["deck"]
    assert (deck["tp"], deck["pp"], deck["dp"], deck["schedule"]) == (8, 16, 8, "1f1b"), deck
    faster = sum(t < deck["step_time_s"] for t in times)
    assert faster < len(times) and result["faster_than_deck"] == faster, (faster, result["faster_than_deck"])
    assert any(c["step_time_s"] == pytest.approx(deck["step_time_s"], rel=1e-12) for c in candidates), deck
    text = trident("plan", GPT3, "--machine", A100, "--search", *sets).stdout
    assert "Fastest grids on 1024 devices" in text and "  #1: computing" in text, text
    assert "the deck: tp 8 x pp 16 x dp 8" in text and f"{faster} grids that fit predicted faster" in text, text
    def schedule(c):
        return c["schedule"] + (f" v {c['virtual_stages']}" if c["virtual_stages"] > 1 else "")
    changes = [f"{key} {deck[key]} -> {best[key]}" for key in ("tp", "cp", "pp", "dp") if deck[key] != best[key]]
    if deck["micro_batch_size"] != best["micro_batch_size"]:
        changes.append(f"micro-batch {deck['micro_batch_size']} -> {best['micro_batch_size']}")
    if schedule(deck) != schedule(best):
        changes.append(f"schedule {schedule(deck)} -> {schedule(best)}")
    if deck["recompute"] != best["recompute"]:
        changes.append(f"recompute {deck['recompute']} -> {best['recompute']}")
    assert changes and f"against the deck: {', '.join(changes)}; " in text, (changes, text)


@RELEASE_ONLY
def test_search_over_a_mixture_varies_ep_and_each_is_its_own_prediction():
    """[model.moe] (moe-tiny, 8 experts) on the 2-core machine's 8 devices: the search tries every ep
    dividing both dp and the experts, never cp (refused with a mixture), and an ep 2 candidate,
    predicted alone, takes the time the search gave it, its all-to-alls among it."""
    deck, machine = REPO / "input_decks" / "moe-tiny.toml", REPO / "input_decks" / "machines" / "cpu-2core.toml"
    result = json.loads(trident("plan", deck, "--machine", machine, "--search", "--json").stdout)
    candidates = result["candidates"]
    assert all(c["cp"] == 1 and c["dp"] % c["ep"] == 0 and 8 % c["ep"] == 0 for c in candidates), candidates
    assert result["deck"]["ep"] == 2 and result["deck"]["ep_comm_s"] > 0, result["deck"]
    split = next(c for c in candidates if c["ep"] > 1)
    alone = predict(deck, machine, f"parallel.tp={split['tp']}", f"parallel.pp={split['pp']}",
                    f"parallel.dp={split['dp']}", f"parallel.ep={split['ep']}", f"schedule.kind={split['schedule']}",
                    f"schedule.virtual_stages={split['virtual_stages']}",
                    f"schedule.microbatches={split['microbatches']}",
                    f"schedule.micro_batch_size={split['micro_batch_size']}",
                    f"schedule.recompute=\"{split['recompute']}\"")
    assert alone["step_time_s"] == pytest.approx(split["step_time_s"], rel=1e-12), (alone, split)
    assert alone["ep_comm_s"] > 0, alone
