"""Checkpoints (DESIGN.md "Checkpoint"): bitwise resume on the same grid, resharding onto other
grids, detection of corrupt files with fallback to the previous checkpoint, and SIGUSR1 at a step
boundary (checkpoint, exit 3, resume continues the same losses)."""
import os
import signal

import h5py
import numpy as np
import pytest

from conftest import TrainingJob, read_steps
from equivalence import final_weights, latest_checkpoint_group

# Constant learning rate: a run that stops early has the same schedule as one that goes on.
BASE = ("model.layers=8", "train.decay=constant", "train.warmup_steps=0", "train.lr=1e-3", "schedule.micro_batch_size=2",
        "checkpoint.every=5")
GRID_221 = ("parallel.tp=2", "parallel.pp=2", "parallel.dp=1", "schedule.microbatches=4")


def test_resume_is_bitwise_on_the_same_grid(trident_run, tmp_path):
    _, straight = trident_run(*BASE, *GRID_221, "train.steps=10", ranks=4)
    resumed = tmp_path / "resumed"
    trident_run(*BASE, *GRID_221, "train.steps=5", f"output.dir={resumed}", ranks=4)
    proc, _ = trident_run(*BASE, *GRID_221, "train.steps=10", f"output.dir={resumed}", ranks=4)
    assert "resume" in proc.stdout and "step_00000005.h5" in proc.stdout, proc.stdout
    a, b = read_steps(straight), read_steps(resumed)
    np.testing.assert_array_equal(b["step"], np.arange(1, 11))
    np.testing.assert_array_equal(b["loss"], a["loss"])
    for label, x, y in (("weights", final_weights(straight), final_weights(resumed)),
                        ("optimizer", latest_checkpoint_group(straight, "optimizer"),
                         latest_checkpoint_group(resumed, "optimizer"))):
        assert x.keys() == y.keys()
        for key in x:
            np.testing.assert_array_equal(y[key], x[key], err_msg=f"{label}: {key}")


def grid(tp, pp, dp, kind="1f1b", v=1):
    """Overrides for a tp x pp x dp grid with the schedule `kind` over v virtual stages; the
    micro-batches per replica keep the global batch at 4 micro-batches of 2."""
    return (f"parallel.tp={tp}", f"parallel.pp={pp}", f"parallel.dp={dp}", f"schedule.kind={kind}",
            f"schedule.virtual_stages={v}", f"schedule.microbatches={4 // dp}"), tp * pp * dp


# Cases the sanitizer build leaves to the release build (reported as skipped): it reads the boxes
# of another tp, pp, dp and interleaving through the first and the last resharding case.
RELEASE_ONLY = pytest.mark.skipif(os.environ.get("TRIDENT_SANITIZED") == "1", reason="release build only")

# (written on, resumed on): other tp and dp, a deeper and a shallower pipeline, interleaving
# switched on and off (the virtual stages change the layers each rank holds), tp and pp at once.
RESHARDING = [
    pytest.param((2, 2, 1), (1, 1, 2), id="2x2x1-to-1x1x2"),
    pytest.param((2, 2, 1), (2, 1, 2), id="2x2x1-to-2x1x2", marks=RELEASE_ONLY),
    pytest.param((1, 2, 1), (1, 3, 1), id="pp2-to-pp3", marks=RELEASE_ONLY),
    pytest.param((1, 1, 1), (1, 4, 1, "interleaved-1f1b", 2), id="pp1-to-pp4-interleaved", marks=RELEASE_ONLY),
    pytest.param((1, 4, 1, "interleaved-1f1b", 2), (2, 2, 1), id="pp4-interleaved-to-tp2-pp2"),
]


@pytest.mark.parametrize("written_on,resumed_on", RESHARDING)
def test_checkpoint_resumes_on_another_grid(trident_run, written_on, resumed_on):
    """Steps 6 to 8 resumed from step 5's checkpoint on another grid give the losses that the
    writing run had on its own grid (which resumes bitwise: the test above)."""
    overrides, ranks = grid(*written_on)
    _, writer = trident_run(*BASE, *overrides, "train.steps=8", ranks=ranks)
    checkpoint = writer / "checkpoints" / "step_00000005.h5"
    overrides, ranks = grid(*resumed_on)
    proc, other = trident_run(*BASE, *overrides, "train.steps=8", f"checkpoint.resume={checkpoint}", ranks=ranks)
    tp, pp, dp = written_on[:3]
    assert f"written on grid {tp}x{pp}x{dp}" in proc.stdout, proc.stdout
    a, b = read_steps(writer), read_steps(other)
    np.testing.assert_array_equal(b["step"], [6, 7, 8])
    np.testing.assert_allclose(b["loss"], a["loss"][5:], rtol=1e-5)


def corrupt_truncate(path):
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    return path.name


def corrupt_flip(path):
    dataset = "model/h/1/mlp/c_fc/weight"
    with h5py.File(path, "r") as f:
        offset = f[dataset].id.get_offset()
    with open(path, "r+b") as f:
        f.seek(offset + 100)
        data = bytearray(f.read(16))
        f.seek(offset + 100)
        f.write(bytes(b ^ 0xFF for b in data))
    return dataset


def corrupt_delete(path):
    dataset = "optimizer/v/ln_f/bias"
    with h5py.File(path, "r+") as f:
        del f[dataset]
    return dataset


def corrupt_step(path):
    """Metadata a resume cannot use: a negative step (io/checkpoint_header)."""
    with h5py.File(path, "r+") as f:
        f.attrs["step"] = np.int64(-3)
    return "attribute 'step' is -3"


# The sanitizer build runs the fallback through a truncated file (HDF5 cannot open it) and a
# flipped byte (the checksum); a deleted dataset and bad metadata are the same fallback (and
# checkpoint_header's own errors are unit-tested in tests/io).


@pytest.mark.parametrize("corrupt", [corrupt_truncate, corrupt_flip, pytest.param(corrupt_delete, marks=RELEASE_ONLY),
                                     pytest.param(corrupt_step, marks=RELEASE_ONLY)])
def test_corrupt_newest_checkpoint_falls_back_to_the_previous(trident_run, corrupt):
    _, run_dir = trident_run(*BASE, *GRID_221, "train.steps=10", ranks=4)
    newest = run_dir / "checkpoints" / "step_00000010.h5"
    named = corrupt(newest)
    proc, _ = trident_run(*BASE, *GRID_221, "train.steps=12", f"output.dir={run_dir}", ranks=4)
    assert "warning" in proc.stdout and named in proc.stdout, proc.stdout
    assert "step_00000005.h5 (step 5" in proc.stdout, proc.stdout
    np.testing.assert_array_equal(read_steps(run_dir)["step"], np.arange(1, 13))


def test_no_valid_checkpoint_refuses_to_start(trident_run):
    _, run_dir = trident_run(*BASE, *GRID_221, "train.steps=10", ranks=4)
    for step in (5, 10):
        corrupt_flip(run_dir / "checkpoints" / f"step_{step:08d}.h5")
    proc, _ = trident_run(*BASE, *GRID_221, "train.steps=12", f"output.dir={run_dir}", ranks=4, expect=2)
    assert proc.stderr.count("trident: error:") == 1, proc.stderr
    assert "no valid checkpoint" in proc.stderr and "checkpoint.resume=none" in proc.stderr, proc.stderr


def test_explicit_resume_path_that_does_not_load_exits_2(trident_run, tmp_path):
    missing = tmp_path / "nowhere" / "step_00000005.h5"
    proc, _ = trident_run(*BASE, f"checkpoint.resume={missing}", expect=2)
    assert proc.stderr.count("trident: error:") == 1 and str(missing) in proc.stderr, proc.stderr


# Long enough for the signal to land mid-run: a sanitized step takes about ten times a release one.
SIGNALLED_STEPS = 60 if os.environ.get("TRIDENT_SANITIZED") == "1" else 300


def test_sigusr1_checkpoints_exits_3_and_resume_continues(trident_run, tmp_path):
    common = (*BASE, "parallel.pp=2", "schedule.microbatches=4", f"train.steps={SIGNALLED_STEPS}",
              "output.log_every=1", "checkpoint.every=0")
    _, straight = trident_run(*common, ranks=2)
    run_dir = tmp_path / "signalled"
    with TrainingJob(run_dir, *common, ranks=2) as job:
        rank1 = job.rank_once_training(1)
        assert rank1 is not None, "rank 1 never started training:\n" + job.output()
        os.kill(rank1, signal.SIGUSR1)
        job.proc.wait(timeout=120)
    out = "".join(job.stdout)
    assert job.proc.returncode == 3, job.output()
    assert "stopped by signal" in out, out
    stopped_at = int(read_steps(run_dir)["step"][-1])
    assert 1 <= stopped_at < SIGNALLED_STEPS
    assert (run_dir / "checkpoints" / f"step_{stopped_at:08d}.h5").exists()
    proc2, _ = trident_run(*common, f"output.dir={run_dir}", ranks=2)
    assert f"(step {stopped_at}" in proc2.stdout, proc2.stdout
    a, b = read_steps(straight), read_steps(run_dir)
    np.testing.assert_array_equal(b["step"], a["step"])
    np.testing.assert_array_equal(b["loss"], a["loss"])
