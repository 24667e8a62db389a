"""kill -9 of a random rank at random times, each run resumed from `latest` (issue 22): with a
checkpoint after every step, the run that finally completes has the uninterrupted run's losses,
bit for bit, in its timeline. Kills land anywhere: in a step, in the pipeline's messages, in a
checkpoint's write (whose partial file the next commit removes), before or after the timeline row."""
import os
import random
import signal
import time

import numpy as np

from conftest import TrainingJob, read_steps, run_trident

STEPS = 20  # more than three kills at most 0.12 s into a run can reach
RUN = ("parallel.pp=2", "schedule.microbatches=2", f"train.steps={STEPS}", "checkpoint.every=1")
KILLS = 3


def test_random_kills_then_resume_reproduce_the_uninterrupted_losses(tmp_path):
    reference = tmp_path / "reference"
    run_trident(reference, *RUN, ranks=2)

    out = tmp_path / "run"
    rng = random.Random(22)
    kills = []
    while len(kills) < KILLS:
        with TrainingJob(out, *RUN, ranks=2) as job:
            rank = rng.randrange(2)
            pid = job.rank_once_training(rank)
            assert pid is not None, job.output()
            delay = rng.uniform(0.0, 0.12)
            time.sleep(delay)
            assert job.proc.poll() is None, "the run ended before its kill:\n" + job.output()
            os.kill(pid, signal.SIGKILL)
            job.proc.wait(timeout=120)
            kills.append((rank, round(delay, 3)))

    run_trident(out, *RUN, ranks=2)  # takes over the lock the last killed run left
    assert not list((out / "checkpoints").glob("*.tmp")), "a commit removes stale partial files"
    np.testing.assert_array_equal(read_steps(out)["loss"], read_steps(reference)["loss"], err_msg=f"kills {kills}")
