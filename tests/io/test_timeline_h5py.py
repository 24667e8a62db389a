"""timeline.h5 as the Python post-processing tools read it: through h5py.

The file comes from write_demo_timeline (path in TRIDENT_WRITE_DEMO_TIMELINE, set by ctest),
whose values this test repeats.
"""
import os
import subprocess

import h5py
import numpy as np
import pytest

STEP_COLUMNS = ["step", "loss", "lr", "grad_norm", "step_time_s", "tokens_per_s", "bubble",
                "achieved_gflops", "mfu", "dp_exposed_s", "peak_activation_bytes"]


@pytest.fixture
def timeline(tmp_path):
    path = tmp_path / "timeline.h5"
    subprocess.run([os.environ["TRIDENT_WRITE_DEMO_TIMELINE"], str(path)], check=True)
    with h5py.File(path, "r") as f:
        yield f


def test_steps_columns_read_by_name(timeline):
    np.testing.assert_array_equal(timeline["steps"]["loss"][:], [5.5, 4.25, 3.125])
    np.testing.assert_array_equal(timeline["steps"]["step"][:], [1, 2, 3])
    np.testing.assert_array_equal(timeline["steps"]["tokens_per_s"][:], [1000.0, 2000.0, 3000.0])
    for name in STEP_COLUMNS:
        assert timeline["steps"][name].shape == (3,), name


def test_string_attributes_are_str(timeline):
    assert isinstance(timeline.attrs["schedule"], str)
    assert timeline.attrs["schedule"] == "1f1b"
    assert timeline.attrs["grid"] == "tp=1 pp=2 dp=1"
    assert timeline.attrs["deck"] == "[model]\nlayers = 2\n"


def test_integer_attributes(timeline):
    assert int(timeline.attrs["p"]) == 2
    assert int(timeline.attrs["m"]) == 4
