"""Shared pytest helpers: run trident under mpirun and read its timeline."""
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "input_decks" / "tiny.toml"
# The tiny deck's grid is the main job's 2 x 2 x 2; tests start from one rank and set the grid they test.
ONE_RANK = ("parallel.tp=1", "parallel.pp=1", "parallel.dp=1")


def _exe():
    exe = os.environ.get("TRIDENT_EXE")
    if not exe or not Path(exe).exists():
        pytest.fail(f"TRIDENT_EXE is unset or missing ({exe!r}): run through ctest")
    return exe


def trident_command(out, *overrides, ranks=1, deck=TINY):
    """`mpirun -n RANKS trident run DECK --set output.dir=OUT --set ...` (after the one-rank overrides)."""
    cmd = [os.environ.get("TRIDENT_MPIEXEC", "mpirun"), "-n", str(ranks), _exe(), "run", str(deck),
           "--set", f"output.dir={out}"]
    for o in ONE_RANK + overrides:
        cmd += ["--set", o]
    return cmd


def run_trident(out, *overrides, ranks=1, deck=TINY, expect=0, env=None):
    """Runs trident_command(...) (in `env`, default this process's environment) and returns the
    completed process once it exited with `expect`."""
    cmd = trident_command(out, *overrides, ranks=ranks, deck=deck)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == expect, f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture
def trident_run(tmp_path):
    """run_trident into a fresh directory under tmp_path; returns (completed process, run dir)."""

    def run(*overrides, ranks=1, deck=TINY, expect=0):
        out = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        return run_trident(out, *overrides, ranks=ranks, deck=deck, expect=expect), out

    return run


def post(*args, expect=0):
    """Runs `trident-post ARGS` (matplotlib without a display) and returns the completed process once
    it exited with `expect`."""
    proc = subprocess.run([sys.executable, str(REPO / "postprocess" / "trident-post"), *map(str, args)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "MPLBACKEND": "Agg"})
    assert proc.returncode == expect, (f"trident-post {' '.join(map(str, args))} exited {proc.returncode}, "
                                       f"expected {expect}\n{proc.stdout}\n{proc.stderr}")
    return proc


def read_steps(run_dir):
    with h5py.File(run_dir / "timeline.h5", "r") as f:
        return {name: np.asarray(f["steps"][name]) for name in f["steps"]}


class TrainingJob:
    """trident_command(...) running in a session of its own, for tests that act on its ranks while
    it trains: `with TrainingJob(out, ...) as job:`. Its output is read into job.stdout and
    job.stderr (lists of lines) as it comes; leaving the block kills the job if it still runs."""

    def __init__(self, out, *overrides, ranks, env=None):
        self.cmd = trident_command(out, *overrides, ranks=ranks)
        self.env = env
        self.stdout, self.stderr = [], []

    def __enter__(self):
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True, env=self.env)
        self._readers = [threading.Thread(target=lines.extend, args=(stream,), daemon=True)
                         for lines, stream in ((self.stdout, self.proc.stdout), (self.stderr, self.proc.stderr))]
        for reader in self._readers:
            reader.start()
        return self

    def __exit__(self, *exception):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for reader in self._readers:
            reader.join(timeout=5)
        return False

    def rank_once_training(self, world_rank, timeout=120):
        """The pid of MPI world rank `world_rank` once the first step line is out, or None if none
        came within `timeout` seconds (or the job ended first)."""
        deadline = time.time() + timeout
        while time.time() < deadline and self.proc.poll() is None and not any(
                line.startswith("step") for line in self.stdout):
            time.sleep(0.01)
        return rank_process(self.proc.pid, world_rank)

    def output(self):
        return "".join(self.stdout + self.stderr)


def rank_process(session_pid, world_rank):
    """The pid of MPI world rank `world_rank` among the trident processes of an mpirun started with
    start_new_session=True (session id = mpirun's pid), or None while it has not started."""
    pids = subprocess.run(["pgrep", "-s", str(session_pid), "-f", "trident run"], capture_output=True,
                          text=True).stdout.split()
    for pid in pids:
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={world_rank}".encode() in environ:
            return int(pid)
    return None


# A pytest run whose every test skipped exits 77, which CTest reports as skipped (SKIP_RETURN_CODE);
# any failure keeps pytest's own non-zero status, so a skip can never hide one.
SKIP_EXIT_CODE = 77
_outcomes = set()


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        _outcomes.add(report.outcome)


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 0 and _outcomes == {"skipped"}:
        session.exitstatus = SKIP_EXIT_CODE
