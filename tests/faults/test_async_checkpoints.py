"""checkpoint.async (issue 41, item 1) with real processes: the background write gives the same file
as the synchronous one; a rank killed inside a background write leaves `latest` at the previous
checkpoint, from which the run resumes to the uninterrupted losses bit for bit; a background write
that fails (EIO) is reported as a synchronous one is, under checkpoint.on_failure."""
import os
import signal
import time

import h5py
import matplotlib.image
import numpy as np
import pytest

from conftest import TrainingJob, post, read_steps, run_trident
from failing_disk import failing_writes, listing
from test_checkpoint_writes import assert_clean_failure

RUN = ("parallel.pp=2", "schedule.microbatches=2", "train.steps=6", "checkpoint.every=2")
ASYNC = ("checkpoint.async=true",)


@pytest.fixture(scope="module")
def synchronous(tmp_path_factory):
    """The reference: RUN with synchronous checkpoints."""
    out = tmp_path_factory.mktemp("synchronous") / "run"
    run_trident(out, *RUN, ranks=2)
    return out


def datasets(path):
    """{dataset path: (values, checksum attribute)} of a checkpoint file."""
    found = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, node: found.__setitem__(name, (node[...], node.attrs["checksum"]))
                     if isinstance(node, h5py.Dataset) else None)
    return found


def events(run_dir):
    with h5py.File(run_dir / "timeline.h5", "r") as f:
        found = {name: f["events"][name][...] for name in ("rank", "step", "t_start", "t_end", "bytes")}
        found["kind"] = f["events"]["kind"].asstr()[...]
    return found


def data_bytes(path):
    return sum(4 * values.size for values, _ in datasets(path).values())


def saves(run_dir, kind):
    """{(step, rank): [(t_start, t_end, bytes)]} of the run's events of `kind`."""
    ev = events(run_dir)
    found = {}
    for i in np.flatnonzero(ev["kind"] == kind):
        found.setdefault((int(ev["step"][i]), int(ev["rank"][i])), []).append(
            (float(ev["t_start"][i]), float(ev["t_end"][i]), int(ev["bytes"][i])))
    return found


def test_a_synchronous_save_is_one_stop_per_rank_in_the_timeline(synchronous):
    stops = saves(synchronous, "CKPT_BLOCKED")
    assert sorted(stops) == [(s, r) for s in (2, 4, 6) for r in (0, 1)]
    assert not saves(synchronous, "CKPT_WRITE"), "a synchronous save writes nothing in the background"
    every_save = data_bytes(synchronous / "checkpoints" / "step_00000006.h5")  # keep = 2: steps 4 and 6 are left
    for step in (2, 4, 6):
        assert sum(stops[(step, r)][0][2] for r in (0, 1)) == every_save


# Step 2's background write pauses 2 s, far longer than two tiny steps: it overlaps steps 3 and 4,
# and the save of step 4 waits for it.
SLOW_STEP_2 = "2:2"


def test_a_background_write_gives_the_synchronous_file_and_losses(tmp_path, synchronous):
    out = tmp_path / "run"
    run = run_trident(out, *RUN, *ASYNC, ranks=2, env=dict(os.environ, TRIDENT_TEST_SLOW_CHECKPOINT_WRITE=SLOW_STEP_2))
    assert run.stdout.count("in the background; training blocked") == 2, run.stdout  # steps 2 and 4; 6 is the last
    assert "checkpoint of step 4 waits for the background write of step 2" in run.stdout, run.stdout
    background, reference = (datasets(d / "checkpoints" / "step_00000004.h5") for d in (out, synchronous))
    assert sorted(background) == sorted(reference) and len(reference) > 20
    for name, (values, checksum) in reference.items():
        np.testing.assert_array_equal(background[name][0], values, err_msg=name)
        assert background[name][1] == checksum, name
    np.testing.assert_array_equal(read_steps(out)["loss"], read_steps(synchronous)["loss"])

    # The timeline: per rank, the copy stops training, the thread writes the rank's bytes beside the
    # next steps, and the stop at step 4 lasts until the write is over, then commits.
    writes, stops = saves(out, "CKPT_WRITE"), saves(out, "CKPT_BLOCKED")
    assert sorted(writes) == [(s, r) for s in (2, 4) for r in (0, 1)]
    every_save = data_bytes(out / "checkpoints" / "step_00000006.h5")
    for step in (2, 4):
        assert sum(writes[(step, r)][0][2] for r in (0, 1)) == every_save
    ev = events(out)
    for r in (0, 1):
        (write_start, write_end, _), = writes[(2, r)]
        (copy_start, copy_end, _), = stops[(2, r)]
        # The thread starts once the copy is over (both times on the thread's clock, so whatever
        # preempts the ranks on loaded cores cannot reorder them).
        assert copy_start <= copy_end <= write_start and write_end - write_start >= 2.0
        step_3 = (ev["rank"] == r) & (ev["step"] == 3) & (ev["kind"] == "F")
        assert write_end > ev["t_start"][step_3].min(), "the write went on while step 3 computed"
        commit = [stop for stop in stops[(4, r)] if stop[0] > copy_end]
        assert commit and commit[0][1] >= write_end, "step 4's stop waited for step 2's write"

    # The Gantt chart of step 3 shows the write as a strip; step 1's, without a save, does not. Step
    # 2's shows the stop for its save (the host copy) with --checkpoints only.
    def pixels_of(colour, *args):
        png = tmp_path / "gantt.png"
        post("gantt", out, "-o", png, *args)
        pixels = np.rint(matplotlib.image.imread(png)[..., :3] * 255).astype(int)
        return int((np.abs(pixels - [int(colour[i:i + 2], 16) for i in (1, 3, 5)]).sum(axis=-1) <= 6).sum())

    write_strip, stop_box = "#17becf", "#7f2704"
    assert pixels_of(write_strip, "--step", 1) == 0
    assert pixels_of(write_strip, "--step", 3) >= 200
    assert pixels_of(stop_box, "--step", 2) == 0
    assert pixels_of(stop_box, "--step", 2, "--checkpoints") >= 200


def wait_for_line(job, text, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline and job.proc.poll() is None:
        if any(text in line for line in job.stdout):
            return True
        time.sleep(0.02)
    return False


def test_a_kill_inside_a_background_write_resumes_from_the_previous_checkpoint(tmp_path, synchronous):
    out = tmp_path / "run"
    checkpoints = out / "checkpoints"
    # Step 4's write pauses a minute after its first dataset; step 6's save waits for it, and says so.
    slowed = dict(os.environ, TRIDENT_TEST_SLOW_CHECKPOINT_WRITE="4:60")
    with TrainingJob(out, *RUN, *ASYNC, ranks=2, env=slowed) as job:
        assert wait_for_line(job, "checkpoint of step 6 waits for the background write of step 4"), job.output()
        assert (checkpoints / "step_00000004.h5.tmp").exists(), listing(checkpoints)
        os.kill(job.rank_once_training(1), signal.SIGKILL)
        job.proc.wait(timeout=120)
    assert listing(checkpoints) == ["latest", "step_00000002.h5", "step_00000004.h5.tmp"]
    assert (checkpoints / "latest").read_text().strip() == "step_00000002.h5"

    resumed = run_trident(out, *RUN, *ASYNC, ranks=2)
    assert "step_00000002.h5 (step 2," in resumed.stdout, resumed.stdout
    assert not list(checkpoints.glob("*.tmp")), "a commit removes the killed write's partial file"
    np.testing.assert_array_equal(read_steps(out)["loss"], read_steps(synchronous)["loss"])


def test_a_signal_during_a_background_write_completes_it_saves_and_exits_3(tmp_path):
    out = tmp_path / "run"
    checkpoints = out / "checkpoints"
    slowed = dict(os.environ, TRIDENT_TEST_SLOW_CHECKPOINT_WRITE="2:2")  # step 2's write lasts 2 s or more
    with TrainingJob(out, *RUN, *ASYNC, "train.steps=100", "output.log_every=1", ranks=2, env=slowed) as job:
        assert wait_for_line(job, "  3/100 |"), job.output()  # "step   3/100 | loss ..."
        os.kill(job.rank_once_training(1), signal.SIGUSR1)
        job.proc.wait(timeout=120)
    assert job.proc.returncode == 3, job.output()
    # The signal is seen at the first step boundary after it (3, or later when it came while step 4's
    # save waited for step 2's write). The background write in flight then, or done by then, is
    # committed, and the last save is synchronous: both files are complete, the newest is `latest`.
    stopped = int(read_steps(out)["step"][-1])
    assert f"stopped by signal {int(signal.SIGUSR1)} after step {stopped}" in job.output(), job.output()
    previous = (stopped - 1) // 2 * 2  # the last background save (checkpoint.every = 2)
    assert listing(checkpoints) == ["latest", f"step_{previous:08d}.h5", f"step_{stopped:08d}.h5"], job.output()
    assert (checkpoints / "latest").read_text().strip() == f"step_{stopped:08d}.h5"
    for step in (previous, stopped):
        assert len(datasets(checkpoints / f"step_{step:08d}.h5")) > 20, "complete, with its checksums"


# dp 2: rank 0 alone writes the data. The first 64 KiB written to the file (the layout HDF5 writes
# when it creates the file) succeed; the background write of the data then fails.
GRID = ("parallel.dp=2", "train.steps=3", "checkpoint.every=1", *ASYNC)


def test_a_replica_that_writes_nothing_copies_nothing(tmp_path):
    """dp 2: the second replica neither copies nor writes (train/checkpoint.cpp); the file is the
    synchronous one's, all of its bytes copied and written by rank 0."""
    runs = {}
    for name, settings in {"sync": (), "async": ASYNC}.items():
        runs[name] = tmp_path / name
        run_trident(runs[name], "parallel.dp=2", "train.steps=2", "checkpoint.every=1", *settings, ranks=2)
    background, reference = (datasets(runs[name] / "checkpoints" / "step_00000002.h5") for name in ("async", "sync"))
    assert sorted(background) == sorted(reference) and len(reference) > 20
    for name, (values, checksum) in reference.items():
        np.testing.assert_array_equal(background[name][0], values, err_msg=name)
        assert background[name][1] == checksum, name
    whole = data_bytes(runs["async"] / "checkpoints" / "step_00000002.h5")  # rank 0 holds the whole model
    writes, stops = saves(runs["async"], "CKPT_WRITE"), saves(runs["async"], "CKPT_BLOCKED")
    assert [writes[(1, r)][0][2] for r in (0, 1)] == [whole, 0]
    assert [stops[(1, r)][0][2] for r in (0, 1)] == [whole, 0], "the host copy's bytes"


def failing_background_write(file_name):
    return dict(failing_writes(file_name), TRIDENT_FAIL_WRITES_AFTER=str(64 * 1024))


def test_a_failing_background_write_ends_the_run_like_a_synchronous_one(tmp_path):
    out = tmp_path / "run"
    run = run_trident(out, *GRID, ranks=2, expect=1, env=failing_background_write("step_00000001.h5.tmp"))
    assert "write of dataset" in run.stderr, "the background write failed, not the file's creation\n" + run.stderr
    assert_clean_failure(run, 1, "Input/output error", out / "checkpoints" / "step_00000001.h5.tmp")
    assert not (out / "checkpoints" / "step_00000001.h5.tmp").exists()


def test_a_failing_background_write_under_continue_trains_on(tmp_path):
    out = tmp_path / "run"
    run = run_trident(out, *GRID, "checkpoint.on_failure=continue", ranks=2,
                      env=failing_background_write("step_00000001.h5.tmp"))
    assert "warning: checkpoint of step 1 not written" in run.stdout, run.stdout
    assert "write of dataset" in run.stdout and "Input/output error" in run.stdout, run.stdout
    assert listing(out / "checkpoints") == ["latest", "step_00000002.h5", "step_00000003.h5"]
