"""Shared pytest helpers: run trident under mpirun and read its timeline."""
import os
import subprocess
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


def run_trident(out, *overrides, ranks=1, deck=TINY, expect=0):
    """Runs `mpirun -n RANKS trident run DECK --set output.dir=OUT --set ...` (after the one-rank
    overrides) and returns the completed process once it exited with `expect`."""
    cmd = [os.environ.get("TRIDENT_MPIEXEC", "mpirun"), "-n", str(ranks), _exe(), "run", str(deck),
           "--set", f"output.dir={out}"]
    for o in ONE_RANK + overrides:
        cmd += ["--set", o]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == expect, f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture
def trident_run(tmp_path):
    """run_trident into a fresh directory under tmp_path; returns (completed process, run dir)."""

    def run(*overrides, ranks=1, deck=TINY, expect=0):
        out = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        return run_trident(out, *overrides, ranks=ranks, deck=deck, expect=expect), out

    return run


def read_steps(run_dir):
    with h5py.File(run_dir / "timeline.h5", "r") as f:
        return {name: np.asarray(f["steps"][name]) for name in f["steps"]}


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
