"""Issue 16's promise for the Llama family: every grid and schedule trains the same model as one rank
on the same global batch (losses, grad norms and every final weight tensor, as for GPT-2).

input_decks/llama-tiny.toml narrowed to 8 layers of d_model 32 with grouped-query attention (4 query
heads on 2 kv heads) and an untied head; the global batch is m x dp micro-batches of one sequence,
so the one-rank reference runs m x dp micro-batches.
"""
import numpy as np
import pytest

from conftest import REPO, read_steps
from equivalence import assert_same_training, final_weights

LLAMA = REPO / "input_decks" / "llama-tiny.toml"
SMALL = ("model.layers=8", "model.d_model=32", "model.heads=4", "model.kv_heads=2", "model.ffn_hidden=48",
         "model.seq_len=32", "train.steps=3", "schedule.micro_batch_size=1", "train.warmup_steps=1",
         "train.lr=1e-3", "train.min_lr=1e-4", "checkpoint.every=0")

_references = {}


def training(trident_run, *overrides, ranks=1):
    _, run_dir = trident_run(*SMALL, *overrides, ranks=ranks, deck=LLAMA)
    return read_steps(run_dir), final_weights(run_dir)


def reference(trident_run, global_microbatches, *extra):
    key = (global_microbatches, extra)
    if key not in _references:
        _references[key] = training(trident_run, f"schedule.microbatches={global_microbatches}", *extra)
    return _references[key]


# (label, tp, pp, dp, schedule overrides, other overrides)
GRIDS = [
    ("tp2 gqa", 2, 1, 1, ("schedule.kind=1f1b", "schedule.microbatches=4"), ()),
    ("tp2 pp2 1f1b", 2, 2, 1, ("schedule.kind=1f1b", "schedule.microbatches=4"), ()),
    ("pp3 uneven zb-h1", 1, 3, 1, ("schedule.kind=zb-h1", "schedule.microbatches=5"), ()),
    ("pp2 interleaved v2", 1, 2, 1,
     ("schedule.kind=interleaved-1f1b", "schedule.virtual_stages=2", "schedule.microbatches=4"), ()),
    ("pp2 dp2 zero-1 gpipe", 1, 2, 2, ("schedule.kind=gpipe", "schedule.microbatches=2"), ("parallel.zero=1",)),
    ("tp2 pp2 recompute", 2, 2, 1, ("schedule.kind=1f1b", "schedule.microbatches=4"), ("schedule.recompute=full",)),
    ("tp2 pp2 selective", 2, 2, 1, ("schedule.kind=1f1b", "schedule.microbatches=4"),
     ("schedule.recompute=selective",)),
    ("tied head pp2", 1, 2, 1, ("schedule.kind=1f1b", "schedule.microbatches=4"), ("model.tie_embeddings=true",)),
    ("tp2 pp2 zb-v tied", 2, 2, 1, ("schedule.kind=zb-v", "schedule.virtual_stages=2", "schedule.microbatches=3"),
     ("model.tie_embeddings=true",)),
    ("pp3 v-half", 1, 3, 1, ("schedule.kind=v-half", "schedule.virtual_stages=2", "schedule.microbatches=4"), ()),
    ("pp2 dualpipev", 1, 2, 1, ("schedule.kind=dualpipev", "schedule.virtual_stages=2", "schedule.microbatches=5"),
     ()),
    # Packed documents: a vocabulary of 16 puts about two end-of-document tokens in each sequence.
    ("tp2 pp2 zb-h1 documents", 2, 2, 1, ("schedule.kind=zb-h1", "schedule.microbatches=4"),
     ("model.vocab=16", "data.document_mask=true", "data.eod_token=3")),
]


@pytest.mark.parametrize("label,tp,pp,dp,schedule,extra", GRIDS, ids=[g[0] for g in GRIDS])
def test_llama_grid_equals_single_rank(trident_run, label, tp, pp, dp, schedule, extra):
    m = int(next(o for o in schedule if o.startswith("schedule.microbatches=")).split("=")[1])
    model_extra = tuple(o for o in extra if o.startswith(("model.", "data.")))
    one_rank = reference(trident_run, m * dp, *model_extra)
    grid = training(trident_run, f"parallel.tp={tp}", f"parallel.pp={pp}", f"parallel.dp={dp}", *schedule, *extra,
                    ranks=tp * pp * dp)
    assert_same_training(one_rank, grid, label, weight_rtol=2.5e-5 if tp * dp > 1 else 1e-5)


def test_llama_checkpoint_resumes_on_another_grid(trident_run):
    """A Llama checkpoint written by tp 2 x pp 2 resumes on pp 3 (uneven stages, untied head on the
    last): the resumed steps give the uninterrupted run's losses."""
    schedule = ("schedule.kind=1f1b", "schedule.microbatches=3", "train.steps=6")
    _, writer = trident_run(*SMALL, *schedule, "checkpoint.every=3", "parallel.tp=2", "parallel.pp=2",
                            ranks=4, deck=LLAMA)
    checkpoint = writer / "checkpoints" / "step_00000003.h5"
    _, reader = trident_run(*SMALL, *schedule, f"checkpoint.resume={checkpoint}", "parallel.pp=3", ranks=3,
                            deck=LLAMA)
    written, resumed = read_steps(writer), read_steps(reader)
    assert list(resumed["step"]) == [4, 5, 6]
    np.testing.assert_allclose(resumed["loss"], written["loss"][3:], rtol=1e-5)
