"""The watchdog covers every blocking wait of a step (issue 22, item 4): a rank stopped anywhere in
a data-parallel step (forward, backward, the gradient all-reduce, the loss and norm reductions,
the optimizer, the step's event gather) leaves its peer waiting in some collective; within
schedule.timeout_s the peer names the operation and the group, and the whole job ends."""
import os
import re
import signal
import time

import pytest

from conftest import TrainingJob

TIMEOUT_S = 2
REPORT = re.compile(r"world rank 0: watchdog: waited (\d+) s in the (.+?) of the (dp|world) group "
                    r"\((?:all 2 ranks|world ranks 0, 1 on [^)]+)\)")


# The tiny deck spends its step in forward and backward: a stop there leaves the peer in the
# gradient all-reduce. With a large vocabulary and one short sequence per step, AdamW takes most of
# the step: a stop there leaves the peer in the barrier before the step's event gather.
SHAPES = {
    "compute-heavy": (),
    "optimizer-heavy": ("model.vocab=50257", "model.seq_len=16", "schedule.microbatches=1",
                        "schedule.micro_batch_size=1"),
}


@pytest.mark.parametrize("shape, delay_s",
                         [("compute-heavy", 0.0), ("compute-heavy", 0.3), ("optimizer-heavy", 0.15),
                          ("optimizer-heavy", 0.4)])
def test_a_rank_stopped_anywhere_in_a_step_ends_the_job_within_the_timeout(tmp_path, shape, delay_s):
    with TrainingJob(tmp_path / "run", "parallel.dp=2", *SHAPES[shape], "train.steps=100000",
                     f"schedule.timeout_s={TIMEOUT_S}", ranks=2) as job:
        stopped = job.rank_once_training(1)
        assert stopped is not None, "rank 1 never started training:\n" + job.output()
        time.sleep(delay_s)
        os.kill(stopped, signal.SIGSTOP)
        stop_time = time.time()
        while time.time() - stop_time < TIMEOUT_S + 10 and not any("watchdog" in line for line in job.stderr):
            time.sleep(0.05)
        noticed = time.time() - stop_time
        os.kill(stopped, signal.SIGCONT)  # a stopped process cannot act on the abort's SIGTERM
        job.proc.wait(timeout=60)
    stderr = "".join(job.stderr)
    report = REPORT.search(stderr)
    assert report, stderr
    assert int(report.group(1)) >= TIMEOUT_S, stderr
    assert noticed < TIMEOUT_S + 3, f"noticed {noticed:.1f} s after the stop, with a {TIMEOUT_S} s timeout"
    assert "raise schedule.timeout_s" in stderr, stderr
    assert job.proc.returncode == 4, f"exit code {job.proc.returncode} (4: a peer stopped answering)"
