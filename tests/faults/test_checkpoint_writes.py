"""Checkpoints that cannot be written (issue 22, item 1): a failing disk (a shim that makes the
writes to one checkpoint file fail with EIO) and a full one (a real tmpfs, where the test may mount
one). Each case asserts the exit code, the message, and the files left on disk: the partial file
removed, `latest` and the previous checkpoint untouched and still resumable."""
import re
import subprocess

import numpy as np
import pytest

from conftest import read_steps, run_trident
from failing_disk import failing_writes, listing

GRID = ("parallel.dp=2",)  # two ranks write each checkpoint collectively
EVERY_STEP = ("train.steps=3", "checkpoint.every=1")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The reference: the same run with nothing failing. Its losses, and one checkpoint's size."""
    out = tmp_path_factory.mktemp("reference") / "run"
    run_trident(out, *GRID, *EVERY_STEP, ranks=2)
    return read_steps(out)["loss"], (out / "checkpoints" / "step_00000003.h5").stat().st_size


def assert_clean_failure(run, step, reason, tmp_file):
    """One message, from rank 0, naming the step, the OS's reason, the file and the space; every
    rank ended by itself (no MPI_Abort)."""
    assert run.stderr.count("trident: runtime failure:") == 1, run.stderr
    message = run.stderr
    assert f"checkpoint of step {step} not written" in message, message
    assert reason in message, message
    assert str(tmp_file) in message, message
    assert re.search(r"\d+\.\d\d [MGT]iB needed, \d+\.\d\d [MGT]iB free in /", message), message
    assert "`latest` and the previous checkpoints are untouched" in message, message
    assert "MPI_ABORT" not in run.stdout + run.stderr, run.stderr


def test_an_io_error_ends_every_rank_and_leaves_the_previous_checkpoint(tmp_path):
    out = tmp_path / "run"
    checkpoints = out / "checkpoints"
    run = run_trident(out, *GRID, *EVERY_STEP, ranks=2, expect=1, env=failing_writes("step_00000002.h5.tmp"))
    assert_clean_failure(run, 2, "Input/output error", checkpoints / "step_00000002.h5.tmp")
    assert "checkpoint.on_failure = \"continue\" trains on without it" in run.stderr, run.stderr
    assert listing(checkpoints) == ["latest", "step_00000001.h5"]
    assert (checkpoints / "latest").read_text().strip() == "step_00000001.h5"
    assert not (out / ".trident.lock").exists(), "every rank exited normally: the lock is gone"

    resumed = run_trident(out, *GRID, *EVERY_STEP, ranks=2)
    assert "step_00000001.h5 (step 1," in resumed.stdout, resumed.stdout


def test_on_failure_continue_trains_on_and_saves_the_next_checkpoint(tmp_path, uninterrupted):
    out = tmp_path / "run"
    checkpoints = out / "checkpoints"
    run = run_trident(out, *GRID, *EVERY_STEP, "checkpoint.on_failure=continue", ranks=2,
                      env=failing_writes("step_00000002.h5.tmp"))
    assert "warning: checkpoint of step 2 not written" in run.stdout, run.stdout
    assert "Input/output error" in run.stdout, run.stdout
    assert listing(checkpoints) == ["latest", "step_00000001.h5", "step_00000003.h5"]
    assert (checkpoints / "latest").read_text().strip() == "step_00000003.h5"
    losses, _ = uninterrupted
    np.testing.assert_array_equal(read_steps(out)["loss"], losses)


def test_the_last_checkpoint_failing_ends_the_run_even_with_continue(tmp_path):
    out = tmp_path / "run"
    run = run_trident(out, *GRID, *EVERY_STEP, "checkpoint.on_failure=continue", ranks=2, expect=1,
                      env=failing_writes("step_00000003.h5.tmp"))
    assert_clean_failure(run, 3, "Input/output error", out / "checkpoints" / "step_00000003.h5.tmp")
    assert listing(out / "checkpoints") == ["latest", "step_00000001.h5", "step_00000002.h5"]


@pytest.fixture
def small_disk(tmp_path, uninterrupted):
    """A tmpfs that holds one and a half checkpoints; skipped where this process may not mount."""
    _, checkpoint_bytes = uninterrupted
    disk = tmp_path / "disk"
    disk.mkdir()
    size_kib = checkpoint_bytes * 3 // 2 // 1024
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield disk
    subprocess.run(["umount", str(disk)], check=True)


def test_a_full_disk_is_named_and_the_partial_file_removed(tmp_path, small_disk):
    out = tmp_path / "run"
    run = run_trident(out, *GRID, *EVERY_STEP, "checkpoint.keep=1", f"checkpoint.dir={small_disk}", ranks=2,
                      expect=1)
    assert "warning: checkpoint.keep + 1 = 2 checkpoints" in run.stdout, run.stdout
    assert_clean_failure(run, 2, "No space left on device", small_disk / "step_00000002.h5.tmp")
    assert listing(small_disk) == ["latest", "step_00000001.h5"]
    assert (small_disk / "latest").read_text().strip() == "step_00000001.h5"
