"""Issue 39's promise for a mixture of experts ([model.moe], Mixtral's block): with expert
parallelism (parallel.ep: the experts split over ep of the data-parallel ranks, tokens sent to them
and back by all-to-all), tensor, pipeline and data parallelism, every schedule, recomputation and
ZeRO-1, training is the one-rank training on the same global batch (losses, grad norms, every final
weight: equivalence.py's bounds), the load-balancing loss and the experts' load included; a
checkpoint written on ep 2 resumes on ep 1 and the reverse, and an impossible split exits 2.

The sanitizer build (TRIDENT_SANITIZED=1) runs one grid; the release build all of them.
"""
import os

import numpy as np
import pytest

from conftest import REPO, read_steps
from equivalence import assert_same_training, final_weights

DECK = REPO / "input_decks" / "moe-tiny.toml"
# Layers 0 and 2 are mixtures (layer_freq 2), 1 and 3 dense MLPs: both kinds on every stage.
SMALL = ("model.d_model=32", "model.ffn_hidden=48", "model.seq_len=32", "model.moe.experts=4",
         "model.moe.expert_ffn_hidden=32", "model.moe.layer_freq=2", "model.moe.aux_loss_coef=0.05")
COMMON = SMALL + ("parallel.ep=1", "train.steps=4", "schedule.micro_batch_size=2", "train.warmup_steps=1", "train.lr=1e-3",
                  "train.min_lr=1e-4", "checkpoint.every=0")
GLOBAL_MICROBATCHES = 4  # m × dp
SANITIZED = os.environ.get("TRIDENT_SANITIZED") == "1"
RELEASE_ONLY = pytest.mark.skipif(SANITIZED, reason="the sanitizer build runs one grid")

_references = {}


def training(trident_run, *overrides, ranks=1):
    _, run_dir = trident_run(*COMMON, *overrides, ranks=ranks, deck=DECK)
    return read_steps(run_dir), final_weights(run_dir)


def reference(trident_run, *model):
    if model not in _references:
        _references[model] = training(trident_run, *model, f"schedule.microbatches={GLOBAL_MICROBATCHES}",
                                      "parallel.tp=1", "parallel.pp=1", "parallel.dp=1")
    return _references[model]


def grid(label, tp, pp, dp, *extra, model=(), sanitized=False):
    return pytest.param(label, tp, pp, dp, extra, model, marks=() if sanitized else RELEASE_ONLY, id=label)


GRIDS = [
    grid("ep2 tp2 zero-1", 2, 1, 2, "parallel.ep=2", "parallel.zero=1", sanitized=True),
    grid("ep2", 1, 1, 2, "parallel.ep=2"),
    grid("ep4", 1, 1, 4, "parallel.ep=4"),
    grid("ep2 pp2 zb-h1", 1, 2, 2, "parallel.ep=2", "schedule.kind=zb-h1"),
    grid("ep2 of dp4 zero-1 capacity 1.0", 1, 1, 4, "parallel.ep=2", "parallel.zero=1",
         model=("model.moe.capacity_factor=1.0",)),
    grid("tp2 pp2 zb-h1", 2, 2, 1, "schedule.kind=zb-h1"),
    grid("dp2 zero-1", 1, 1, 2, "parallel.zero=1"),
    grid("pp2 1f1b full recompute", 1, 2, 1, "schedule.kind=1f1b", "schedule.recompute=full"),
    grid("tp2 dp2 selective recompute", 2, 1, 2, "schedule.recompute=selective"),
    grid("tp2 capacity 1.0", 2, 1, 1, model=("model.moe.capacity_factor=1.0",)),
]


@pytest.mark.parametrize("label,tp,pp,dp,extra,model", GRIDS)
def test_mixture_equals_single_rank(trident_run, label, tp, pp, dp, extra, model):
    one_rank = reference(trident_run, *model)
    other = training(trident_run, *model, f"parallel.tp={tp}", f"parallel.pp={pp}", f"parallel.dp={dp}",
                     f"schedule.microbatches={GLOBAL_MICROBATCHES // dp}", *extra, ranks=tp * pp * dp)
    assert_same_training(one_rank, other, label, weight_rtol=2.5e-5)
    for column in ("aux_loss", "expert_load"):
        np.testing.assert_allclose(other[0][column], one_rank[0][column], rtol=1e-5, err_msg=f"{label}: {column}")


@RELEASE_ONLY
@pytest.mark.parametrize("writer_ep,reader_ep", [(2, 1), (1, 2)])
def test_checkpoint_resumes_across_ep(trident_run, writer_ep, reader_ep):
    """A checkpoint written at step 2 on ep = writer_ep (each rank its experts) resumes on ep =
    reader_ep with the losses of the uninterrupted run."""
    grid = ("parallel.tp=1", "parallel.pp=1", "parallel.dp=2", "schedule.microbatches=2", "train.steps=4")
    _, writer = trident_run(*COMMON, *grid, "checkpoint.every=2", f"parallel.ep={writer_ep}", ranks=2, deck=DECK)
    checkpoint = writer / "checkpoints" / "step_00000002.h5"
    _, reader = trident_run(*COMMON, *grid, f"checkpoint.resume={checkpoint}", f"parallel.ep={reader_ep}", ranks=2,
                            deck=DECK)
    written, resumed = read_steps(writer), read_steps(reader)
    assert list(resumed["step"]) == [3, 4]
    np.testing.assert_allclose(resumed["loss"], written["loss"][2:], rtol=1e-5)


def test_impossible_ep_exits_2_naming_the_valid_values(trident_run):
    proc, _ = trident_run(*SMALL, "parallel.tp=1", "parallel.pp=1", "parallel.dp=2", "parallel.ep=4", ranks=2,
                          deck=DECK, expect=2)
    assert proc.stderr.count("trident: error:") == 1, proc.stderr
    assert "parallel.ep = 4" in proc.stderr and "valid ep: 1, 2" in proc.stderr, proc.stderr


@RELEASE_ONLY
def test_aux_loss_and_capacity_change_the_training(trident_run):
    """The load-balancing loss is logged, joins the gradient, and a capacity drops assignments."""
    base = reference(trident_run)
    steps = base[0]
    assert np.all(steps["aux_loss"] > 0) and np.all(steps["expert_load"] >= 1.0)
    # E · Σ f·P with f summing to top_k: a balanced routing gives top_k (2) times the weight.
    assert np.all((steps["aux_loss"] > 0.05) & (steps["aux_loss"] < 0.05 * 2 * 4))
    without_aux = reference(trident_run, "model.moe.aux_loss_coef=0")
    assert np.all(without_aux[0]["aux_loss"] == 0)
    assert without_aux[0]["loss"][0] == pytest.approx(steps["loss"][0], rel=1e-12)  # forward alike at step 1
    assert abs(without_aux[0]["grad_norm"][0] - steps["grad_norm"][0]) > 1e-6 * steps["grad_norm"][0]
    dropping = reference(trident_run, "model.moe.capacity_factor=0.5")
    assert abs(dropping[0]["loss"][0] - steps["loss"][0]) > 1e-5 * steps["loss"][0]
