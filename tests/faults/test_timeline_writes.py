"""A timeline that cannot be written (issue 22, item 5): the run ends with one message that gives the
OS's reason (not the HDF5 driver's state dump) and what to do, no crash, the checkpoints untouched;
run again as it says, the training resumes from `latest` and the timeline holds every step."""
import pytest

from conftest import read_steps, run_trident
from failing_disk import failing_writes, listing

GRID = ("parallel.dp=2", "checkpoint.every=1")


def assert_timeline_failure(run, out):
    assert run.stderr.count("trident: runtime failure:") == 1, run.stderr
    assert "timeline not written" in run.stderr and str(out / "timeline.h5") in run.stderr, run.stderr
    assert "Input/output error" in run.stderr, run.stderr
    assert "errno =" not in run.stderr, "the OS's reason alone, not HDF5's dump of the driver state"
    assert "set output.dir to another file system, then run again" in run.stderr, run.stderr


# 5,000 bytes: HDF5 created the file and fails to flush it; that file can no longer be closed, and
# closing it again at MPI_Finalize crashed HDF5 (exit 139) before the run aborted instead.
@pytest.mark.parametrize("bytes_before_failing", [0, 5_000], ids=["on_creation", "after_creation"])
def test_a_new_timeline_that_cannot_be_written(tmp_path, bytes_before_failing):
    out = tmp_path / "run"
    env = dict(failing_writes("timeline.h5"), TRIDENT_FAIL_WRITES_AFTER=str(bytes_before_failing))
    run = run_trident(out, *GRID, "train.steps=2", ranks=2, expect=1, env=env)
    assert_timeline_failure(run, out)
    assert "checkpoints" not in listing(out), "no step ran"


@pytest.mark.parametrize("bytes_before_failing", [0, 100_000], ids=["on_opening", "mid_run"])
def test_a_resumed_timeline_that_fails_leaves_the_checkpoints_and_resumes(tmp_path, bytes_before_failing):
    out = tmp_path / "run"
    run_trident(out, *GRID, "train.steps=2", ranks=2)
    before = listing(out / "checkpoints")
    env = dict(failing_writes("timeline.h5"), TRIDENT_FAIL_WRITES_AFTER=str(bytes_before_failing))
    run = run_trident(out, *GRID, "train.steps=4", "checkpoint.keep=9", ranks=2, expect=1, env=env)
    assert_timeline_failure(run, out)
    assert set(before) <= set(listing(out / "checkpoints")), "the checkpoints there before are kept"

    again = run_trident(out, *GRID, "train.steps=4", ranks=2)
    assert "resume" in again.stdout, again.stdout
    assert list(read_steps(out)["step"]) == [1, 2, 3, 4]
