"""`trident plan`'s activation memory per rank against what a run measures.

For each recompute mode, the plan's "activations" column (in flight x stash per micro-batch + what
the mode rebuilds) is compared with the run's /steps/peak_activation_bytes_per_stage, the
high-water mark of the bytes each stage's ranks really held. They must agree within 5%.
"""

import re
import subprocess

import numpy as np
import pytest

from conftest import ONE_RANK, TINY, _exe, read_steps

UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
GRID = ("parallel.tp=2", "parallel.pp=2", "schedule.kind=1f1b", "schedule.microbatches=4", "train.steps=2")


def planned_activation_bytes(overrides):
    """The 'activations' column of plan's memory table, in bytes, one entry per stage."""
    args = [_exe(), "plan", str(TINY)]
    for override in ONE_RANK + overrides:
        args += ["--set", override]
    text = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    table = text.split("\nMemory per rank")[1].split("\n\n")[0].splitlines()
    header = re.split(r"\s{2,}", table[1].strip())
    column = header.index("activations")
    planned = []
    for row in table[2:]:
        cells = re.split(r"\s{2,}", row.strip())
        value, unit = cells[column].split()
        planned.append(float(value) * UNITS[unit])
    return np.array(planned)


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_planned_activations_match_the_measured_peak(trident_run, recompute):
    overrides = GRID + (f"schedule.recompute={recompute}",)
    _, run_dir = trident_run(*overrides, ranks=4)
    measured = read_steps(run_dir)["peak_activation_bytes_per_stage"][-1].astype(float)
    planned = planned_activation_bytes(overrides)
    assert len(planned) == len(measured) == 2
    np.testing.assert_allclose(planned, measured, rtol=0.05, err_msg=f"recompute {recompute}")


def test_selective_recompute_drops_the_probabilities_from_the_stash(trident_run):
    """Per layer and micro-batch, the stash shrinks by the B x (H/tp) x T x T probabilities; the
    rank keeps one layer's worth to rebuild them in."""
    peaks = {}
    for recompute in ("none", "selective"):
        _, run_dir = trident_run(*GRID, f"schedule.recompute={recompute}", ranks=4)
        peaks[recompute] = read_steps(run_dir)["peak_activation_bytes_per_stage"][-1]
    mbs, heads_per_rank, seq_len, layers_per_stage, in_flight = 4, 2, 64, 1, np.array([2, 1])
    probabilities = 4 * mbs * heads_per_rank * seq_len * seq_len
    saved = in_flight * layers_per_stage * probabilities - probabilities
    np.testing.assert_array_equal(peaks["none"] - peaks["selective"], saved)
