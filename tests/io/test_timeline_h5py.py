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
                "achieved_gflops", "mfu", "dp_exposed_s", "tp_comm_s", "timeline_s", "peak_activation_bytes"]
EVENT_COLUMNS = {"rank": np.int32, "tp": np.int32, "pp": np.int32, "dp": np.int32, "step": np.int32,
                 "microbatch": np.int32, "chunk": np.int32, "t_start": np.float64, "t_end": np.float64,
                 "bytes": np.int64}


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


def test_per_stage_peaks_are_a_steps_by_stages_array(timeline):
    per_stage = timeline["steps"]["peak_activation_bytes_per_stage"]
    assert per_stage.shape == (3, 2)
    assert per_stage.dtype == np.int64
    assert per_stage.maxshape == (None, 2)
    peaks = per_stage[:]
    np.testing.assert_array_equal(peaks, [[4096, 1024], [8192, 2048], [2**33, 3072]])
    np.testing.assert_array_equal(peaks[:, 1], [1024, 2048, 3072])  # one stage over the steps
    np.testing.assert_array_equal(peaks.max(axis=1), timeline["steps"]["peak_activation_bytes"][:])


def test_string_attributes_are_str(timeline):
    assert isinstance(timeline.attrs["schedule"], str)
    assert timeline.attrs["schedule"] == "1f1b"
    assert timeline.attrs["grid"] == "tp=1 pp=2 dp=1"
    assert timeline.attrs["deck"] == "[model]\nlayers = 2\n"


def test_integer_attributes(timeline):
    assert int(timeline.attrs["p"]) == 2
    assert int(timeline.attrs["m"]) == 4


def test_events_columns_read_by_name(timeline):
    events = timeline["events"]
    for name, dtype in EVENT_COLUMNS.items():
        assert events[name].shape == (5,), name
        assert events[name].dtype == dtype, name
    # Fixed-length bytes: compare as bytes, or decode with .asstr().
    assert events["kind"].dtype == np.dtype("S24")
    np.testing.assert_array_equal(events["kind"][:], [b"F", b"SEND", b"RECV", b"F", b"OPTIMIZER"])
    assert list(events["kind"].asstr()[:]) == ["F", "SEND", "RECV", "F", "OPTIMIZER"]
    np.testing.assert_array_equal(events["rank"][:], [0, 0, 1, 1, 0])
    np.testing.assert_array_equal(events["pp"][:], [0, 0, 1, 1, 0])
    np.testing.assert_array_equal(events["microbatch"][:], [0, 0, 0, 0, -1])
    np.testing.assert_array_equal(events["chunk"][:], [0, 0, 0, 0, -1])
    np.testing.assert_array_equal(events["t_start"][:], [0.0, 0.25, 0.0, 0.375, 0.75])
    np.testing.assert_array_equal(events["t_end"][:], [0.25, 0.375, 0.375, 0.625, 1.0])
    np.testing.assert_array_equal(events["bytes"][:], [0, 4096, 4096, 0, 0])


def test_events_select_with_numpy(timeline):
    """The way the post-processing tools slice the table: boolean masks over whole columns."""
    events = timeline["events"]
    kind = events["kind"][:]
    forward = kind == b"F"
    durations = events["t_end"][:][forward] - events["t_start"][:][forward]
    np.testing.assert_allclose(durations, [0.25, 0.25])
    assert events["bytes"][:][kind == b"SEND"].sum() == 4096
