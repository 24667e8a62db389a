"""One live run per run directory (issue 22, item 2): a second run in the directory of a live one
is refused up front, naming it; the lock a killed run leaves behind is taken over."""
import os
import signal
import socket
import subprocess
import time

from conftest import TrainingJob, run_trident

GRID = ("parallel.dp=2",)


def test_a_live_runs_directory_is_refused_and_a_killed_runs_lock_taken_over(tmp_path):
    out = tmp_path / "run"
    lock = out / ".trident.lock"
    with TrainingJob(out, *GRID, "train.steps=100000", ranks=2) as job:
        rank0 = job.rank_once_training(0)
        assert rank0 is not None, job.output()
        host, pid, _ = lock.read_text().split()
        assert (host, int(pid)) == (socket.gethostname(), rank0)

        second = run_trident(out, *GRID, "train.steps=2", ranks=2, expect=2)
        message = second.stdout + second.stderr
        assert f"is in use by another trident run (pid {pid} on host {host}" in message, message
        assert "set output.dir to another directory" in message, message
        assert job.proc.poll() is None, "the live run must not be disturbed"

        for rank in (0, 1):  # as a node crash would: the ranks die, no clean-up runs
            os.kill(job.rank_once_training(rank), signal.SIGKILL)
        job.proc.wait(timeout=60)
    assert lock.exists(), "a killed run cannot remove its lock"

    third = run_trident(out, *GRID, "train.steps=2", "checkpoint.resume=none", ranks=2)
    assert f"taking over {lock}: its run (pid {pid} on host {host}) is gone" in third.stdout, third.stdout
    assert not lock.exists(), "a finished run removes its lock"


def test_a_lock_held_by_a_zombie_is_taken_over(tmp_path):
    """A killed rank that nobody has reaped yet (its mpirun exited first; a container's init may
    never reap) still answers kill(pid, 0), but it is dead: its lock is taken over."""
    out = tmp_path / "run"
    out.mkdir()
    lock = out / ".trident.lock"
    child = subprocess.Popen(["true"])  # not waited for: it stays a zombie
    stat_path = f"/proc/{child.pid}/stat"
    for _ in range(200):
        fields = open(stat_path).read().rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            break
        time.sleep(0.05)
    assert fields[0] == "Z", f"{child.pid} did not become a zombie: {fields[0]}"
    lock.write_text(f"{socket.gethostname()} {child.pid} {fields[19]}\n")  # field 22: start time

    run = run_trident(out, "train.steps=1", "checkpoint.resume=none")
    assert f"taking over {lock}: its run (pid {child.pid} on host" in run.stdout, run.stdout
    assert not lock.exists(), "a finished run removes its lock"
    child.wait()
