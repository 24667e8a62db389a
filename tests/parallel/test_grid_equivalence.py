"""The promise of issue 3: any (tp, dp) grid trains the same model as one rank on the same global batch.

Every run below uses the tiny deck with a global batch of 8 sequences (micro_batch_size 2 × m × dp),
so each grid sees the same data; losses per step and every final weight tensor must agree to 1e-5 relative (L2 norm of the
difference over the norm of the tensor).
"""
import numpy as np
import pytest

from conftest import read_steps
from equivalence import assert_same_training, final_weights

STEPS = 5
GLOBAL_MICROBATCHES = 4  # m × dp
# AdamW turns reassociation noise in near-zero gradients into weight differences of order lr,
# so the weight comparison runs at a moderate lr (the losses would agree at any lr).
COMMON = ("train.steps=%d" % STEPS, "schedule.micro_batch_size=2", "train.warmup_steps=2",
          "train.lr=1e-3", "train.min_lr=1e-4", "checkpoint.every=0")


def grid_run(trident_run, tp, dp, *extra):
    m = GLOBAL_MICROBATCHES // dp
    proc, run_dir = trident_run(*COMMON, f"parallel.tp={tp}", f"parallel.dp={dp}",
                                f"schedule.microbatches={m}", *extra, ranks=tp * dp)
    return read_steps(run_dir), final_weights(run_dir)


@pytest.mark.parametrize("tp,dp", [(2, 1), (4, 1), (1, 2), (1, 4), (2, 2), (2, 4)])
def test_grid_equals_single_rank(trident_run, tp, dp):
    reference = grid_run(trident_run, 1, 1)
    assert_same_training(reference, grid_run(trident_run, tp, dp), f"tp={tp} dp={dp}")


@pytest.mark.parametrize("tp,dp", [(1, 2), (2, 2), (1, 4)])
def test_zero1_equals_plain_data_parallel(trident_run, tp, dp):
    plain = grid_run(trident_run, tp, dp)
    assert_same_training(plain, grid_run(trident_run, tp, dp, "parallel.zero=1"), f"zero-1 tp={tp} dp={dp}")


# A vocabulary of 16 puts about four end-of-document tokens in each sequence of 64.
DOCUMENTS = ("model.vocab=16", "data.document_mask=true", "data.eod_token=3")


def test_packed_documents_grid_equals_single_rank(trident_run):
    """Packed documents (data.document_mask): attention stops at each end-of-document token and the
    positions restart, the same training on tp 2 x dp 2 with sequence parallelism as on one rank,
    and not the training without the mask."""
    reference = grid_run(trident_run, 1, 1, *DOCUMENTS)
    grid = grid_run(trident_run, 2, 2, *DOCUMENTS, "parallel.sequence_parallel=true")
    assert_same_training(reference, grid, "documents tp=2 dp=2 sp")
    unmasked = grid_run(trident_run, 1, 1, *DOCUMENTS[:1])
    assert abs(unmasked[0]["loss"][0] - reference[0]["loss"][0]) > 1e-4 * reference[0]["loss"][0]


def test_active_gradient_clipping_is_grid_independent(trident_run):
    reference = grid_run(trident_run, 1, 1, "train.grad_clip=0.05")
    assert np.all(reference[0]["grad_norm"] > 0.05), "the clip must be active for this test to mean anything"
    for tp, dp in [(2, 2), (1, 4)]:
        assert_same_training(reference, grid_run(trident_run, tp, dp, "train.grad_clip=0.05"), f"clip tp={tp} dp={dp}")


def test_heads_not_divisible_by_tp_exits_2_with_one_message(trident_run):
    proc, _ = trident_run("parallel.tp=3", ranks=3, expect=2)
    assert proc.stderr.count("trident: error:") == 1, proc.stderr
    assert "parallel.tp" in proc.stderr and "model.heads" in proc.stderr


def test_world_size_mismatch_exits_2_with_one_message(trident_run):
    proc, _ = trident_run("parallel.dp=2", ranks=4, expect=2)
    assert proc.stderr.count("trident: error:") == 1, proc.stderr
    assert "MPI started 4 ranks" in proc.stderr
