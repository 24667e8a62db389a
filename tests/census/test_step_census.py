"""bench/step_census: one training step counted, for the GPU step's budget (issue 36).

The census counts through Kokkos Tools what trident names (kernels/profile.hpp): kernels by label,
matrix products, host waits and device allocations inside the second step. Checked here: the
products against the model's shapes (counted independently below), counts that must not grow with
the depth (per-tensor launches or host waits would), and the budget items that hold today.
"""
import json
import os
import subprocess

import pytest

CENSUS = os.environ.get("TRIDENT_STEP_CENSUS", "build/cpu/bench/step_census")
TRIDENT = os.environ.get("TRIDENT_EXE", "build/cpu/src/trident")
DECKS = os.environ.get("TRIDENT_DECKS", "input_decks")
MPIEXEC = os.environ.get("TRIDENT_MPIEXEC", "mpirun")

# One rank, one micro-batch of B = 4 sequences of T = 64 (inside one attention tile on the CPU and
# the GPU build alike), d_model 64.
DECK = {"gpt2": "tiny.toml", "llama": "llama-tiny.toml"}
ONE_RANK = ["parallel.tp=1", "parallel.pp=1", "parallel.dp=1", "schedule.microbatches=1"]
B = 4


def census(family, layers, *settings, ranks=1, time=False):
    command = [CENSUS, os.path.join(DECKS, DECK[family])] + (["--time"] if time else [])
    for setting in ONE_RANK + [f"model.layers={layers}", *settings]:
        command += ["--set", setting]
    if ranks > 1:
        command = [MPIEXEC, "-n", str(ranks)] + command
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def expected_products_per_layer(family):
    """Products of one layer's forward and backward, from the layer's structure.

    Each linear layer is one product forward and two backward (input and weight gradient); Llama's
    q, k, v are one linear layer (one [q | k | v] weight), and so are gate and up. Attention,
    per sequence and key/value group with T inside one tile: forward the scores and the
    probabilities times V (both batched over the group's heads); backward the scores again, dV and dK
    (one product per query head of the group: a head's share adds into its group's), dP and dQ.
    """
    if family == "gpt2":
        linear, groups, heads_per_group = 4, 1, 1  # c_attn, attn c_proj, c_fc, mlp c_proj; all heads one batch
    else:
        linear, groups, heads_per_group = 4, 2, 2  # q|k|v, o, gate|up, down; 4 heads over 2 kv heads
    attention = 2 + (1 + 2 * heads_per_group + 2)
    return 3 * linear + B * groups * attention


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_products_are_the_layers_products(family):
    counts = census(family, 12)
    assert counts["layer_backwards"] == 12
    assert counts["products_per_layer"] == expected_products_per_layer(family)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_nothing_per_tensor(family):
    """What the optimizer launches and what the step waits for do not grow with the layers."""
    shallow, deep = census(family, 2), census(family, 12)
    for key in ["optimizer_launches", "host_syncs_in_step", "kernel_launches_per_layer", "epilogue_launches_per_layer",
                "products_per_layer"]:
        assert deep[key] == shallow[key], key
    # Nor with the micro-batches: their tokens go to the device in one copy.
    assert census(family, 2, "schedule.microbatches=3")["host_syncs_in_step"] == shallow["host_syncs_in_step"]
    per_layer = deep["kernel_launches_per_layer"] + deep["epilogue_launches_per_layer"] + deep["products_per_layer"]
    assert deep["launches_per_step"] - shallow["launches_per_step"] == 10 * per_layer


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_budget_items_that_hold(family):
    counts = census(family, 12)
    assert counts["optimizer_launches"] <= 4, counts["kernels"]
    assert counts["kernels"]["adamw"] == 1
    assert counts["allocations_in_step"] == 0, counts["allocations"]
    assert counts["host_syncs_in_step"] <= 2, counts["host_syncs"]  # the tokens' upload, the figures' read
    # The gradient norm and the loss stay on the device until the step's one read.
    assert not {"sum_of_squares", "softmax_cross_entropy"} & set(counts["host_syncs"]), counts["host_syncs"]
    # A norm's backward is one launch, its weight gradients summed as the rows go (12 layers' two
    # norms and the final one).
    norm = "layernorm_backward" if family == "gpt2" else "rmsnorm_backward"
    assert counts["kernels"][norm] == 2 * 12 + 1
    assert not [label for label in counts["kernels"] if label.startswith(norm + "_")], counts["kernels"]
    # Biases, the GELU and their gradients are the products' epilogues, not kernels of their own.
    loose = [label for label in counts["kernels"] if not label.startswith("gemm/") and ("bias" in label or "gelu" in label)]
    assert not loose, counts["kernels"]


def test_llamas_mlp_gives_its_products_bf16_as_stored():
    """Under bf16 every activation and gradient of Llama's MLP that a product reads is stored as the
    product reads it: the norm's output, SwiGLU's output and, from its backward, d(gate | up). So
    the bytes the products round for themselves do not grow with the MLP's width."""
    def rounded_bytes(ffn_hidden):
        counts = census("llama", 2, "train.precision=bf16", f"model.ffn_hidden={ffn_hidden}")
        return counts["kernel_bytes"]["gemm/round_operand"]
    assert rounded_bytes(256) == rounded_bytes(128)


@pytest.mark.parametrize("family,linear_layers", [("gpt2", 4), ("llama", 3)])
def test_each_output_gradient_is_rounded_once_for_its_two_products(family, linear_layers):
    """Under bf16, with the weight gradients done in backward, each linear layer's output gradient is
    rounded to bf16 once (gemm.hpp's RoundedOnce, label bf16_operand) for its input and weight
    gradients' products: GPT-2's four layers, Llama's three besides gate|up, whose gradient SwiGLU
    stores in bf16 itself, and the head's logits gradient. At fp32 nothing is rounded."""
    counts = census(family, 12, "train.precision=bf16")
    assert counts["kernels"]["gemm/bf16_operand"] == linear_layers * 12 + 1, counts["kernels"]
    assert "gemm/bf16_operand" not in census(family, 2)["kernels"]


# The GPU's fused attention (src/gpu/flash_attention_*.cu, the GPU build's default under bf16): one
# launch forward and two backward per layer, whatever the sequences and heads.
FUSED_ATTENTION_LAUNCHES_PER_LAYER = 3


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_layer_kernels_within_budget_with_the_gpus_fused_attention(family):
    """<= 16 kernel launches per layer besides the products once the GPU's fused attention takes
    the place of the tiled kernel's row kernels (two forward and three backward per sequence and
    key/value group; the CPU build has no fused kernel to count)."""
    counts = census(family, 12)
    groups = 1 if family == "gpt2" else 2
    tiled = sum(n for label, n in counts["kernels"].items() if label.startswith("tiled_attention_"))
    assert tiled == 12 * 5 * B * groups, counts["kernels"]
    others = counts["kernel_launches_per_layer"] - tiled // 12
    assert others + FUSED_ATTENTION_LAUNCHES_PER_LAYER <= 16, counts["kernels"]


def test_zero1_optimizer_is_one_update_and_one_norm():
    counts = census("gpt2", 2, "parallel.dp=2", "parallel.zero=1", ranks=2)
    assert counts["kernels"]["adamw"] == 1
    assert counts["kernels"]["sum_of_squares"] == 1
    assert counts["optimizer_launches"] == 2


def test_time_covers_every_kernel_and_product_within_the_step():
    """--time: each launched kernel label and each product of a layer timed, inside the step's time."""
    counted = census("gpt2", 2)
    timed = census("gpt2", 2, time=True)
    assert set(timed["kernel_ms"]) == set(counted["kernels"])
    assert all(ms >= 0 for ms in timed["kernel_ms"].values())
    # The products named by region and place: four linear layers forward (c_attn, c_proj, c_fc,
    # mlp c_proj), two attention products per sequence (T inside one tile, all heads one batch).
    forward = sorted(name for name in timed["product_ms"] if name.startswith("layer_forward"))
    assert forward == [f"layer_forward #{i:02d}" for i in range(1, 4 + 2 * B + 1)]
    device = timed["device_ms"]
    assert device["step"] > 0
    assert device["kernels"] + device["products"] <= device["step"] * (1 + 1e-6)
    assert device["between"] == pytest.approx(device["step"] - device["kernels"] - device["products"])
    assert device["products"] == pytest.approx(sum(timed["product_ms"].values()))


# The decks' shapes (input_decks/tiny.toml, llama-tiny.toml), for the costs below.
SHAPE = {"gpt2": dict(C=64, T=64, V=256, heads=4, kv_heads=4, F=256),
         "llama": dict(C=64, T=64, V=256, heads=4, kv_heads=2, F=128)}


def expected_product_flops(family, layers):
    """2 operations per weight and token forward, 4 backward, over the linear layers and the head;
    attention's seven T x T x hd products per head (T inside one tile: two forward, five backward)."""
    s = SHAPE[family]
    C, T, V, F, kv = s["C"], s["T"], s["V"], s["F"], s["kv_heads"] * s["C"] // s["heads"]
    if family == "gpt2":
        weights = C * 3 * C + C * C + C * F + F * C          # c_attn, attn c_proj, c_fc, mlp c_proj
    else:
        weights = C * (C + 2 * kv) + C * C + C * 2 * F + F * C  # q|k|v, o, gate|up, down
    attention = 7 * 2 * B * T * T * C                         # Σ over heads of 2·T·T·hd
    return layers * (6 * B * T * weights + attention) + 6 * B * T * C * V


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_every_kernel_declares_its_cost(family):
    """Each kernel and product declares its bytes and operations (kernels/profile.hpp); the
    products' operations are the model's, and AdamW moves 28 bytes a parameter (param, grad, m, v
    read; param, m, v written)."""
    counts = census(family, 2)
    assert counts["undeclared_kernels"] == [], counts["undeclared_kernels"]
    assert counts["product_flops"] == expected_product_flops(family, 2)
    if family == "gpt2":
        s = SHAPE["gpt2"]
        C, L = s["C"], 2
        parameters = s["V"] * C + s["T"] * C + L * (12 * C * C + 13 * C) + 2 * C  # tied head
        assert counts["kernel_bytes"]["adamw"] == 28 * parameters


MACHINE = os.path.join(DECKS, "machines", "cpu-2core.toml")


def test_machine_prices_every_launch_from_its_declared_cost():
    """--machine: each kernel label's predicted time is its launches' bytes at the machine's memory
    bandwidth or their operations at its FP32 peak, the slower (a sum over launches of the slower of
    the two lies between the slower and the sum of the sums); the products' between their operations
    at the best and the worst of the efficiency curve (and their bytes). The machine file is read
    here, not through trident."""
    import tomllib
    with open(MACHINE, "rb") as f:
        compute = tomllib.load(f)["compute"]
    bandwidth, fp32 = compute["memory_bandwidth_gbs"] * 1e9, compute["peak_tflops_fp32"] * 1e12
    product_peak = compute["peak_tflops_tf32"] * 1e12  # tiny.toml's automatic precision: TF32 where given
    fractions = [fraction for _, fraction in compute["gemm_efficiency"]]
    command = [CENSUS, os.path.join(DECKS, DECK["gpt2"]), "--time", "--machine", MACHINE]
    for setting in ONE_RANK + ["model.layers=2"]:
        command += ["--set", setting]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)

    assert set(counts["kernel_predicted_ms"]) == set(counts["kernels"])
    for label, ms in counts["kernel_predicted_ms"].items():
        byte_s, flop_s = counts["kernel_bytes"][label] / bandwidth, counts["kernel_flops"][label] / fp32
        assert max(byte_s, flop_s) * (1 - 1e-9) <= ms / 1e3 <= (byte_s + flop_s) * (1 + 1e-9), label
        if counts["kernels"][label] == 1:
            assert ms / 1e3 == pytest.approx(max(byte_s, flop_s), rel=1e-9), label
    assert set(counts["product_predicted_ms"]) == set(counts["product_ms"])
    products_s = sum(counts["product_predicted_ms"].values()) / 1e3
    assert counts["product_flops"] / (product_peak * max(fractions)) * (1 - 1e-9) <= products_s
    assert products_s <= (counts["product_flops"] / (product_peak * min(fractions)) +
                          counts["product_bytes"] / bandwidth) * (1 + 1e-9)
    predicted = counts["predicted_ms"]
    assert predicted["step"] == pytest.approx(predicted["kernels"] + predicted["products"])
    inside = sum(ms for label, ms in counts["kernel_predicted_ms"].items() if label.startswith("gemm/"))
    assert predicted["products"] == pytest.approx(products_s * 1e3 + inside)
    assert counts["machine"] == "2-core CPU VM"
    # The step time `trident plan --machine` gives the same deck, beside the launches' sum.
    settings = [word for setting in ONE_RANK + ["model.layers=2"] for word in ("--set", setting)]
    plan = subprocess.run([TRIDENT, "plan", os.path.join(DECKS, DECK["gpt2"]), "--machine", MACHINE, "--json"] + settings,
                          capture_output=True, text=True, timeout=60)
    assert plan.returncode == 0, plan.stderr
    assert counts["plan_step_ms"] == pytest.approx(1e3 * json.loads(plan.stdout)["step_time_s"], rel=1e-6)

    # The table on stderr: a row per kernel label and per product, with its measured time.
    lines = [line.strip() for line in done.stderr.splitlines()]
    assert lines[0].startswith("step_census: one step on 2-core CPU VM"), lines[0]
    assert lines[1].split()[-1] == "measured/predicted", lines[1]
    for row in list(counts["kernels"]) + ["product " + name for name in counts["product_ms"]]:
        found = [line for line in lines[2:] if line.startswith(row + "  ")]
        assert len(found) == 1, row
        assert len(found[0][len(row):].split()) == 6, found[0]  # launches, MB, GFLOP, predicted, measured, ratio


@pytest.mark.parametrize("arguments, message", [
    (["--machine", "no-such-machine.toml"], "no-such-machine.toml: machine file not found"),
    (["--machine"], "unknown argument '--machine'"),
])
def test_a_bad_machine_argument_exits_2_naming_it(arguments, message):
    done = subprocess.run([CENSUS, os.path.join(DECKS, DECK["gpt2"])] + arguments, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert message in done.stderr
