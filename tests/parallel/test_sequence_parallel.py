"""Issue 18's promise for sequence parallelism: with parallel.sequence_parallel = true, each TP rank
holds B*T/tp rows of the residual stream, and the training is still one rank's (losses, grad norms
and every final weight, as the other grids), for both families, tp 2 and 4, each recompute mode,
pipeline schedules with deferred weight gradients and interleaving, and data parallelism with
ZeRO-1. The pipeline's messages carry 1/tp of the bytes they carry without it.

The sanitizer build (TRIDENT_SANITIZED=1) runs one case per family; the release build all of them.
"""
import os

import h5py
import numpy as np
import pytest

from conftest import REPO, read_steps
from equivalence import assert_same_training, final_weights

SANITIZED = os.environ.get("TRIDENT_SANITIZED") == "1"
RELEASE_ONLY = pytest.mark.skipif(SANITIZED, reason="the sanitizer build runs one case per family")

COMMON = ("model.layers=4", "model.d_model=32", "model.heads=4", "model.seq_len=32", "train.steps=3",
          "schedule.micro_batch_size=2", "train.warmup_steps=1", "train.lr=1e-3", "train.min_lr=1e-4",
          "checkpoint.every=2")
FAMILIES = {
    "gpt2": (REPO / "input_decks" / "tiny.toml", ()),
    # kv_heads = heads, so that tp 4 splits the kv heads too
    "llama": (REPO / "input_decks" / "llama-tiny.toml", ("model.kv_heads=4", "model.ffn_hidden=48")),
}

_references = {}


def training(trident_run, family, *overrides, ranks=1):
    deck, shape = FAMILIES[family]
    _, run_dir = trident_run(*COMMON, *shape, *overrides, ranks=ranks, deck=deck)
    return run_dir


def reference(trident_run, family, global_microbatches):
    key = (family, global_microbatches)
    if key not in _references:
        run_dir = training(trident_run, family, f"schedule.microbatches={global_microbatches}")
        _references[key] = (read_steps(run_dir), final_weights(run_dir))
    return _references[key]


def case(family, tp, pp, dp, schedule, m, *extra, sanitized=False):
    return pytest.param(family, tp, pp, dp, schedule, m, extra, marks=() if sanitized else RELEASE_ONLY,
                        id=f"{family}-tp{tp}-pp{pp}-dp{dp}-{schedule}-m{m}" + "".join(f"-{e}" for e in extra))


CASES = [
    case("gpt2", 2, 1, 1, "1f1b", 2, sanitized=True),
    case("gpt2", 4, 1, 1, "1f1b", 2, "schedule.recompute=selective"),
    case("gpt2", 2, 2, 1, "zb-h1", 4, "schedule.recompute=full"),
    case("gpt2", 2, 2, 2, "1f1b", 2, "parallel.zero=1"),
    case("llama", 2, 2, 1, "zb-h1", 4, "schedule.recompute=selective", sanitized=True),
    case("llama", 4, 1, 1, "1f1b", 2),
    case("llama", 2, 2, 1, "interleaved-1f1b", 4, "schedule.virtual_stages=2", "schedule.recompute=full"),
    case("llama", 2, 1, 2, "gpipe", 2, "parallel.zero=1"),
]


@pytest.mark.parametrize("family,tp,pp,dp,schedule,m,extra", CASES)
def test_sequence_parallel_equals_single_rank(trident_run, family, tp, pp, dp, schedule, m, extra):
    label = f"{family} sequence parallel tp {tp} pp {pp} dp {dp} {schedule} {extra}"
    grid = training(trident_run, family, "parallel.sequence_parallel=true", f"parallel.tp={tp}", f"parallel.pp={pp}",
                    f"parallel.dp={dp}", f"schedule.kind={schedule}", f"schedule.microbatches={m}", *extra,
                    ranks=tp * pp * dp)
    assert_same_training(reference(trident_run, family, m * dp), (read_steps(grid), final_weights(grid)), label,
                         weight_rtol=2.5e-5)


def p2p_message_bytes(run_dir):
    """The sizes of the pipeline messages the timeline's waits for them name."""
    with h5py.File(run_dir / "timeline.h5", "r") as f:
        waits = np.isin(f["events"]["kind"].asstr()[:].astype(str), ["SEND", "RECV"])  # each names its message
        return set(f["events"]["bytes"][:][waits].tolist())


@RELEASE_ONLY
def test_pipeline_messages_carry_one_tp_share_of_the_rows(trident_run):
    """B*T*C floats per message without sequence parallelism, B*T*C/tp with it."""
    grid = ("parallel.tp=2", "parallel.pp=2", "schedule.microbatches=2")
    full = p2p_message_bytes(training(trident_run, "gpt2", *grid, ranks=4))
    shard = p2p_message_bytes(training(trident_run, "gpt2", *grid, "parallel.sequence_parallel=true", ranks=4))
    B, T, C = 2, 32, 32
    assert full == {4 * B * T * C}, full
    assert shard == {4 * B * T * C // 2}, shard
